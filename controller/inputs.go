package controller

import (
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/mosaic-agents/mosaic/conversations"
)

// inputs are the user's files that the controllers give their engines
// and that no engine may change (scopes.Spec.ReadOnly): a tool that
// rewrote one would send another conversation's prompts, and its
// credentials, where it chose, at that conversation's next launch.
//   - Pi's agent directory of every Pi conversation, whose models.json
//     (linked into each engine's own agent directory, agentFiles) sets each
//     provider's base URL, and that models.json again (a link out of the
//     directory is bound where it leads). Each is made (0700) if missing,
//     the default ~/.pi/agent always: a tool could make a missing one, and
//     the conversation would link what it put there. Its auth.json stays
//     writable (writable) when it holds an OAuth login: Pi writes refreshed
//     tokens back through its link (which leaves it a way between
//     conversations: docs/security.md); so does its sessions directory,
//     where Pi keeps the sessions of its own runs outside mosaic.
//   - every Claude conversation's env file (ANTHROPIC_BASE_URL).
//
// The conversations are this controller's and every one in the settings
// store; one added after the launch has its files protected from the
// engines launched after it. An agent directory that is the home or
// holds the conversation's project or a conversation's session file
// (outside its sessions directory) is not bound read-only whole (it would
// take an engine's work with it): only its models.json is, made empty if
// missing.
func (c *Controller) inputs() (ro, writable []string) {
	cvs := []*conversations.Conversation{c.cfg.Conversation}
	if st, err := conversations.Open(); err == nil {
		if all, _, err := st.List(); err == nil {
			cvs = append(cvs, all...)
		}
	}
	home, _ := os.UserHomeDir()
	ro, writable, dirs, models := inputsOf(home, c.cfg.Conversation.Project, cvs)
	for _, d := range dirs {
		// Made so that it is there to bind; one that cannot be made is
		// left to the launch, which notes it absent.
		_ = os.MkdirAll(d, 0o700)
	}
	// Pi writes auth.json only to store refreshed OAuth tokens: one
	// without an OAuth login stays read-only with its directory, so no
	// tool can put a key in it, or a "!command" Pi would run to read one.
	writable = slices.DeleteFunc(writable, func(w string) bool { return filepath.Base(w) == "auth.json" && !holdsOAuth(w) })
	for _, m := range models {
		// A directory bound read-only whole cannot take a models.json
		// later; one whose models.json alone is can, unless it is
		// there: an empty one (no provider added), as Pi reads it.
		if f, err := os.OpenFile(m, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600); err == nil {
			f.WriteString(emptyModels)
			f.Close()
		}
	}
	return ro, writable
}

// holdsOAuth says whether the auth.json at path holds an OAuth login,
// whose tokens Pi refreshes and writes back. One that does not exist
// or does not parse holds none: Pi never writes one it cannot read.
func holdsOAuth(path string) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	// Logins are a few KiB; a larger file (a tool's filler) is read no
	// further and holds none.
	b, err := io.ReadAll(io.LimitReader(f, maxAuth+1))
	if err != nil || len(b) > maxAuth {
		return false
	}
	var creds map[string]struct {
		Type string `json:"type"`
	}
	if json.Unmarshal(b, &creds) != nil {
		return false
	}
	for _, c := range creds {
		if c.Type == "oauth" {
			return true
		}
	}
	return false
}

// maxAuth bounds the auth.json holdsOAuth reads.
const maxAuth = 1 << 20

// emptyModels is a models.json that adds no provider.
const emptyModels = "{\"providers\":{}}\n"

// inputsOf is inputs for the home directory, the conversation's project
// and the conversations cvs, with the agent directories to make and the
// models.json files bound alone, to make when missing.
func inputsOf(home, project string, cvs []*conversations.Conversation) (ro, writable, agents, models []string) {
	var sessions []string
	if home != "" {
		agents = append(agents, filepath.Join(home, ".pi", "agent"))
	}
	for _, cv := range cvs {
		if cv == nil {
			continue
		}
		if cv.IsClaude() {
			if cv.Claude != nil && cv.Claude.EnvFile != "" && !slices.Contains(ro, cv.Claude.EnvFile) {
				ro = append(ro, cv.Claude.EnvFile)
			}
			continue
		}
		sessions = append(sessions, cv.Session)
		if d := cv.Engine.AgentDir; d != "" && filepath.IsAbs(d) && !slices.Contains(agents, filepath.Clean(d)) {
			agents = append(agents, filepath.Clean(d))
		}
	}
	for _, d := range agents {
		m := filepath.Join(d, "models.json")
		if d == "/" || d == home || holds(d, project) || slices.ContainsFunc(sessions, func(s string) bool { return holds(d, s) }) {
			ro = append(ro, m)
			models = append(models, m)
			continue
		}
		ro = append(ro, d, m)
		writable = append(writable, filepath.Join(d, "auth.json"), filepath.Join(d, "sessions"))
	}
	return ro, writable, agents, models
}

// holds says whether p is d or lies below it, other than in d's
// sessions directory (which stays writable).
func holds(d, p string) bool {
	return p != "" && (p == d || strings.HasPrefix(p, d+"/") && !strings.HasPrefix(p, d+"/sessions/"))
}
