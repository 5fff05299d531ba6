package claude

import (
	"strings"

	"github.com/mosaic-agents/mosaic/internal/shape"
	"github.com/mosaic-agents/mosaic/protocol"
)

// baseArgs are on every sealed command line: print mode, stream-json in
// and out (--verbose is required for that, DIGEST §1), permission
// requests over stdio (without it the CLI denies by itself), partial
// messages (the deltas the live view streams), and no settings file or
// MCP configuration at all. Every settings file the CLI would read (the
// user's under CLAUDE_CONFIG_DIR, the project's .claude/settings.json
// and settings.local.json) is one a tool can write, and a settings file
// makes the CLI itself run commands: hooks, an apiKeyHelper, an MCP
// server, or env naming another shell (CLAUDE_CODE_SHELL), each in the
// engine's own Landlock domain, outside the tool shell that keeps tools
// from attaching to it (docs/security.md "Without Yama"). An empty
// --setting-sources loads none (2.1.328: "" is the empty list);
// --strict-mcp-config takes MCP servers from --mcp-config only, which is
// never given.
var baseArgs = []string{
	"-p", "--input-format", "stream-json", "--output-format", "stream-json",
	"--verbose", "--permission-prompt-tool", "stdio", "--include-partial-messages",
	"--setting-sources", "", "--strict-mcp-config",
}

// ValidSession reports whether id is a lowercase RFC 4122 UUID: the only
// session id the controller chooses or adopts, and the only file name the
// history reader opens.
func ValidSession(id string) bool { return shape.UUID(id) }

// Seal is what varies between sealed Claude engines.
type Seal struct {
	// Session is the session UUID: created with --session-id, continued
	// with --resume.
	Session string
	Resume  bool
	// Model is the optional --model value.
	Model string
}

// Args returns the CLI's arguments for s, checked by CheckArgs.
func (s Seal) Args() ([]string, error) {
	args := append([]string(nil), baseArgs...)
	if s.Resume {
		args = append(args, "--resume", s.Session)
	} else {
		args = append(args, "--session-id", s.Session)
	}
	if s.Model != "" {
		args = append(args, "--model", s.Model)
	}
	if err := CheckArgs(args); err != nil {
		return nil, err
	}
	return args, nil
}

// CheckArgs refuses unsealed-engine unless args are exactly baseArgs,
// then one of --session-id or --resume with a session UUID, then at most
// --model with a plain value. Anything else refuses: --fork-session,
// --replay-user-messages, --dangerously-skip-permissions, --mcp-config,
// --settings, --add-dir, --flag=value forms, a bare word (a prompt).
func CheckArgs(args []string) error {
	if len(args) < len(baseArgs)+2 {
		return unsealed("the command line has %d arguments, fewer than the seal's", len(args))
	}
	for i, want := range baseArgs {
		if args[i] != want {
			return unsealed("argument %d is %q, the seal has %q", i, args[i], want)
		}
	}
	rest := args[len(baseArgs):]
	if rest[0] != "--session-id" && rest[0] != "--resume" {
		return unsealed("argument %q is not in the seal (want --session-id or --resume)", rest[0])
	}
	if !ValidSession(rest[1]) {
		return unsealed("%s needs a session UUID, got %q", rest[0], rest[1])
	}
	rest = rest[2:]
	if len(rest) == 0 {
		return nil
	}
	if len(rest) != 2 || rest[0] != "--model" {
		return unsealed("arguments %q are not in the seal (only --model VALUE may follow)", rest)
	}
	if v := rest[1]; v == "" || strings.HasPrefix(v, "-") || strings.ContainsAny(v, "\x00\n\r= ") {
		return unsealed("--model value %q is not plain", v)
	}
	return nil
}

func unsealed(format string, args ...any) error {
	return protocol.Refuse(protocol.CodeUnsealedEngine, format, args...)
}
