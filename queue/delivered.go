package queue

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
)

// maxSessionBytes bounds the session file read to settle deliveries (the
// history reader's file limit).
const maxSessionBytes = 256 << 20

// UserTexts counts the user messages of a Pi session file by their text
// (a string content, or its text blocks joined): the native evidence a
// restarted controller settles dispatched items from. It only reads the
// file. A missing file holds no messages.
func UserTexts(session string) (map[string]int, error) {
	counts := map[string]int{}
	f, err := os.Open(session)
	if os.IsNotExist(err) {
		return counts, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read session %q: %w", session, err)
	}
	defer f.Close()
	r := bufio.NewReaderSize(io.LimitReader(f, maxSessionBytes), 1<<20)
	for {
		line, err := r.ReadBytes('\n')
		if len(line) > 0 {
			if text, ok := userText(line); ok {
				counts[text]++
			}
		}
		if err == io.EOF {
			return counts, nil
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
