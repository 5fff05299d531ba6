package main

import (
	"fmt"
	"io"
	"unicode/utf8"

	"github.com/mosaic-agents/mosaic/engine"
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
// without bound. A text admission would refuse is refused here too
// (checkText).
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
	if err := checkText(text); err != nil {
		return "", err
	}
	return text, nil
}

// checkText refuses, before the verb connects, a text the controller's
// admission would refuse, with the same codes: empty or over the
// contract's cap (draft), or one the text policy refuses (text-policy).
// Refused by the controller, it would come after --take, whose takeover
// has already revoked whoever held control (an attached terminal) for a
// command that did nothing. The policy is engine-neutral (engine/doc.go):
// the controller applies it to Pi and Claude alike, so the verb needs no
// conversation file to know the engine kind.
func checkText(text string) error {
	if n := utf8.RuneCountInString(text); n == 0 || n > protocol.MaxPromptChars {
		return protocol.Refuse(protocol.CodeDraft,
			"the text has %d characters; nothing was sent: a prompt needs 1 to %d (with -, it is all of standard input)", n, protocol.MaxPromptChars)
	}
	return engine.CheckText(text)
}
