package fakeanthropic

import (
	"encoding/json"
	"regexp"
	"strings"

	hclaude "github.com/mosaic-agents/mosaic/history/claude"
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

// reply is what the fake answers one request with.
type reply struct {
	kind string // text, tool or hang
	arg  string
	full bool // report a context near full (FULLCONTEXT)
	bg   bool // a tool reply runs in the background (BASHBG)
}

var (
	bashMarker   = regexp.MustCompile(`BASH\{([^}]*)\}`)
	bashBGMarker = regexp.MustCompile(`BASHBG\{([^}]*)\}`)
)

// script picks the reply from the last block of the last role-user
// message. The CLI places role-system messages after the user turn and
// wraps system reminders in their own text blocks, so both are skipped.
func script(msgs []message) reply {
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Role != "user" {
			continue
		}
		blocks := hclaude.Blocks(msgs[i].Content)
		for j := len(blocks) - 1; j >= 0; j-- {
			b := blocks[j]
			switch {
			case b.Type == "tool_result":
				return reply{kind: "text", arg: "TOOL_DONE: " + hclaude.ResultText(b.Content)}
			case b.Type == "text" && !strings.HasPrefix(b.Text, "<system-reminder>"):
				return textReply(b.Text)
			}
		}
		break
	}
	return reply{kind: "text", arg: "Hello from fake."}
}

func textReply(t string) reply {
	if m := bashBGMarker.FindStringSubmatch(t); m != nil {
		return reply{kind: "tool", arg: m[1], bg: true}
	}
	if m := bashMarker.FindStringSubmatch(t); m != nil {
		return reply{kind: "tool", arg: m[1]}
	}
	if strings.Contains(t, "HANG") {
		return reply{kind: "hang"}
	}
	if strings.Contains(t, "SLOW") {
		return reply{kind: "slow"}
	}
	return reply{kind: "text", arg: "Hello from fake. You said: " + t, full: strings.Contains(t, "FULLCONTEXT")}
}
