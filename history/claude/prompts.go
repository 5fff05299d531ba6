package claude

import (
	"bufio"
	"encoding/json"
	"errors"
	"io"

	"github.com/mosaic-agents/mosaic/history"
	"github.com/mosaic-agents/mosaic/protocol"
)

// ErrShorter is a transcript shorter than a position recorded earlier: it
// was replaced or truncated, so what follows the position cannot be told.
var ErrShorter = errors.New("the transcript is shorter than the recorded position")

// Prompt is one user prompt line of the main chain: where the line
// starts and its text (its text blocks joined). Tool results, sidechain
// lines and every other line type are not prompts.
type Prompt struct {
	Offset int64
	Text   string
}

// Size is the transcript's size now (0 when it does not exist yet): the
// position a dispatch records before the engine write, so that only the
// prompt lines after it can prove the item delivered. Only the file ref
// names is looked at, with the safe-open rules.
func Size(ref Ref) (int64, error) {
	path, err := ref.Path()
	if err != nil {
		return 0, err
	}
	f, err := history.OpenRead(path, history.DefaultMaxSize)
	if err != nil || f == nil {
		return 0, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return 0, protocol.Wrap(protocol.CodeUnreadable, err, "stat claude transcript %s", path)
	}
	return st.Size(), nil
}

// PromptsFrom lists the prompt lines that start at or after from, in
// file order: the native evidence a restarted controller settles
// dispatched queue items from. It reads only the file ref names (safe
// open, at most history.DefaultMaxSize). A missing file holds none, unless
// from is past its start (ErrShorter, as for a shorter file).
func PromptsFrom(ref Ref, from int64) ([]Prompt, error) {
	path, err := ref.Path()
	if err != nil {
		return nil, err
	}
	f, err := history.OpenRead(path, history.DefaultMaxSize)
	if err != nil {
		return nil, err
	}
	if f == nil {
		if from > 0 {
			return nil, ErrShorter
		}
		return nil, nil
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, protocol.Wrap(protocol.CodeUnreadable, err, "stat claude transcript %s", path)
	}
	if st.Size() < from {
		return nil, ErrShorter
	}
	if _, err := f.Seek(from, io.SeekStart); err != nil {
		return nil, protocol.Wrap(protocol.CodeUnreadable, err, "seek claude transcript %s", path)
	}
	var out []Prompt
	r := bufio.NewReaderSize(f, 1<<20)
	at := from
	for {
		b, err := r.ReadBytes('\n')
		if len(b) > 0 {
			if text, ok := promptText(b); ok {
				out = append(out, Prompt{Offset: at, Text: text})
			}
			at += int64(len(b))
		}
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return nil, protocol.Wrap(protocol.CodeUnreadable, err, "read claude transcript %s", path)
		}
	}
}

// promptText is the text of a main-chain user line that carries no tool
// result; a line that does not decode is no prompt (a half-written last
// line proves nothing).
func promptText(b []byte) (string, bool) {
	var l line
	if json.Unmarshal(b, &l) != nil || l.Type != "user" || l.IsSidechain {
		return "", false
	}
	var m message
	if json.Unmarshal(l.Message, &m) != nil || m.Role != "user" {
		return "", false
	}
	text := ""
	for _, blk := range Blocks(m.Content) {
		switch blk.Type {
		case "tool_result":
			return "", false
		case "text":
			text += blk.Text
		}
	}
	return text, true
}
