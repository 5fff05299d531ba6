package main

import (
	"fmt"
	"io"

	"github.com/mosaic-agents/mosaic/protocol"
)

// commandHeadroom is what a prompt or edit command adds around its text
// on the line (type, request id, generation, execution, item, revision,
// keys and quotes): well under 512 bytes.
const commandHeadroom = 512

// promptText returns the text a verb sends: arg itself, or standard input
// when arg is "-". The text must fit the one protocol line its command is
// sent on (protocol.MaxLine, once JSON-escaped). A longer one is refused
// line-too-long here, before connecting: sent, the controller would close
// the connection mid-write and the verb could only say "outcome unknown"
// of a prompt that was never queued. Standard input is read only up to
// the cap, so `yes | mosaicctl prompt ID -` ends instead of growing
// without bound.
func promptText(arg string, stdin io.Reader) (string, error) {
	text := arg
	if arg == "-" {
		b, err := io.ReadAll(io.LimitReader(stdin, protocol.MaxLine+1))
		if err != nil {
			return "", fmt.Errorf("read the text from standard input: %w", err)
		}
		if len(b) > protocol.MaxLine {
			return "", protocol.Refuse(protocol.CodeLineTooLong,
				"standard input holds more than %d bytes, more than one protocol line carries; nothing was sent: shorten the text or split it into several prompts", protocol.MaxLine)
		}
		text = string(b)
	}
	enc, err := protocol.Marshal(text)
	if err != nil {
		return "", fmt.Errorf("encode the text: %w", err)
	}
	if n := len(enc) + commandHeadroom; n > protocol.MaxLine {
		return "", protocol.Refuse(protocol.CodeLineTooLong,
			"the text is %d bytes once JSON-escaped (control characters take 6 each), more than one protocol line of %d bytes carries; nothing was sent: shorten the text or split it into several prompts",
			len(enc), protocol.MaxLine)
	}
	return text, nil
}
