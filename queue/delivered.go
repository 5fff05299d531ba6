package queue

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
)

// maxSessionBytes bounds the session file read to settle deliveries (the
// history reader's file limit).
const maxSessionBytes = 256 << 20

// ErrSessionShorter is a session file shorter than the position a
// dispatch recorded: it was replaced or truncated, so what follows the
// position cannot be told.
var ErrSessionShorter = errors.New("the session file is shorter than at dispatch")

// UserEntry is one user message of a Pi session file: where its line
// starts and the digest of its text.
type UserEntry struct {
	Offset int64
	Digest string
}

// SessionSize is the session file's size now: the position a dispatch
// records before the engine write, so that only user messages after it
// can settle the item. A missing file is 0 long.
func SessionSize(session string) (int64, error) {
	fi, err := os.Stat(session)
	if os.IsNotExist(err) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("stat session %q: %w", session, err)
	}
	return fi.Size(), nil
}

// UserEntriesFrom lists the user messages of a Pi session file whose
// lines start at or after from, in file order, by the digest of their text
// (a string content, or its text blocks joined): the native evidence a
// restarted controller settles dispatched items from. It only reads the
// file, at most maxSessionBytes past from. A missing file holds none.
func UserEntriesFrom(session string, from int64) ([]UserEntry, error) {
	f, err := os.Open(session)
	if os.IsNotExist(err) {
		if from > 0 {
			return nil, fmt.Errorf("read session %q: %w", session, ErrSessionShorter)
		}
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read session %q: %w", session, err)
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil {
		return nil, fmt.Errorf("read session %q: %w", session, err)
	} else if fi.Size() < from {
		return nil, fmt.Errorf("read session %q (%d bytes, %d at dispatch): %w", session, fi.Size(), from, ErrSessionShorter)
	}
	if _, err := f.Seek(from, io.SeekStart); err != nil {
		return nil, fmt.Errorf("read session %q: %w", session, err)
	}
	var out []UserEntry
	r := bufio.NewReaderSize(io.LimitReader(f, maxSessionBytes), 1<<20)
	at := from
	for {
		line, err := r.ReadBytes('\n')
		if len(line) > 0 {
			if text, ok := userText(line); ok {
				out = append(out, UserEntry{Offset: at, Digest: Digest(text)})
			}
			at += int64(len(line))
		}
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("read session %q: %w", session, err)
		}
	}
}

func userText(line []byte) (string, bool) {
	var e struct {
		Type    string `json:"type"`
		Message struct {
			Role    string          `json:"role"`
			Content json.RawMessage `json:"content"`
		} `json:"message"`
	}
	if json.Unmarshal(line, &e) != nil || e.Type != "message" || e.Message.Role != "user" {
		return "", false
	}
	var s string
	if json.Unmarshal(e.Message.Content, &s) == nil {
		return s, true
	}
	var blocks []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if json.Unmarshal(e.Message.Content, &blocks) != nil {
		return "", false
	}
	text := ""
	for _, b := range blocks {
		if b.Type == "text" {
			text += b.Text
		}
	}
	return text, true
}
