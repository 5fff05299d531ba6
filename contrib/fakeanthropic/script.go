package fakeanthropic

import (
	"encoding/json"
	"regexp"
	"strings"
)

type messagesRequest struct {
	Model    string    `json:"model"`
	Messages []message `json:"messages"`
	Stream   bool      `json:"stream"`
}

type message struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

type block struct {
	Type    string          `json:"type"`
	Text    string          `json:"text"`
	Content json.RawMessage `json:"content"`
}

// reply is what the fake answers one request with.
type reply struct {
	kind string // text, tool or hang
	arg  string
}

var bashMarker = regexp.MustCompile(`BASH\{([^}]*)\}`)

// script picks the reply from the last block of the last role-user
// message. The CLI places role-system messages after the user turn and
// wraps system reminders in their own text blocks, so both are skipped.
func script(msgs []message) reply {
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Role != "user" {
			continue
		}
		blocks := contentBlocks(msgs[i].Content)
		for j := len(blocks) - 1; j >= 0; j-- {
			b := blocks[j]
			switch {
			case b.Type == "tool_result":
				return reply{kind: "text", arg: "TOOL_DONE: " + resultText(b.Content)}
			case b.Type == "text" && !strings.HasPrefix(b.Text, "<system-reminder>"):
				return textReply(b.Text)
			}
		}
		break
	}
	return reply{kind: "text", arg: "Hello from fake."}
}

func textReply(t string) reply {
	if m := bashMarker.FindStringSubmatch(t); m != nil {
		return reply{kind: "tool", arg: m[1]}
	}
	if strings.Contains(t, "HANG") {
		return reply{kind: "hang"}
	}
	return reply{kind: "text", arg: "Hello from fake. You said: " + t}
}

// contentBlocks reads content that is either a string or a block list.
func contentBlocks(raw json.RawMessage) []block {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return []block{{Type: "text", Text: s}}
	}
	var bs []block
	_ = json.Unmarshal(raw, &bs)
	return bs
}

func resultText(raw json.RawMessage) string {
	var parts []string
	for _, b := range contentBlocks(raw) {
		if b.Type == "text" {
			parts = append(parts, b.Text)
		}
	}
	return strings.Join(parts, "")
}
