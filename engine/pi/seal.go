package pi

import (
	"path/filepath"
	"strings"

	"github.com/mosaic-agents/mosaic/protocol"
)

// sealFlags are the flags every sealed engine carries, in the order Args
// writes them. Each switches off one way for input other than the Mosaic
// prompt to reach the model (seed 003 "Choices / Seal").
var sealFlags = []string{"--no-extensions", "--no-prompt-templates", "--no-themes", "--no-skills", "--no-context-files"}

// optionFlags may each appear at most once, with one plain value.
var optionFlags = []string{"--provider", "--model", "--thinking"}

// ThinkingLevels are the --thinking values the pinned Pi accepts
// (VALID_THINKING_LEVELS, dist/cli/args.js of 0.85.1). Pi only warns of
// any other on stderr and runs at its default level, so a typo stored in
// a conversation would be dropped silently at every launch; conv add
// refuses it instead.
var ThinkingLevels = []string{"off", "minimal", "low", "medium", "high", "xhigh", "max"}

// Seal is what varies between sealed engines.
type Seal struct {
	// Session is the absolute session file Pi reads and appends.
	Session string
	// Provider, Model and Thinking are optional plain values.
	Provider, Model, Thinking string
	// Extensions are the absolute paths of the reviewed extension files,
	// each passed as -e PATH (Command checks their pins first).
	Extensions []string
}

// extensionFlag loads one extension file; under --no-extensions it is the
// only way an extension enters.
const extensionFlag = "-e"

// Args returns Pi's arguments for s, checked by CheckArgs.
func (s Seal) Args() ([]string, error) {
	args := append([]string{"--mode", "rpc"}, sealFlags...)
	args = append(args, "--session", s.Session)
	for i, v := range []string{s.Provider, s.Model, s.Thinking} {
		if v != "" {
			args = append(args, optionFlags[i], v)
		}
	}
	for _, e := range s.Extensions {
		args = append(args, extensionFlag, e)
	}
	if err := CheckArgs(args); err != nil {
		return nil, err
	}
	return args, nil
}

// CheckArgs refuses unsealed-engine unless args (Pi's arguments, without
// the program) are exactly the seal: --mode rpc, the five --no-* flags,
// --session with an absolute path, and at most one each of --provider,
// --model and --thinking with a plain value, and any number of -e with a
// clean absolute path (a reviewed extension file, pinned by Command; never
// an npm: or git: spec). Anything else refuses: --extension or another
// way to load one, a second --mode or --session (Pi keeps the last), a
// --flag=value form, a session or output flag, or a bare word (Pi reads
// it as a prompt).
func CheckArgs(args []string) error {
	seen := make(map[string]string)
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == extensionFlag {
			if i+1 >= len(args) || !filepath.IsAbs(args[i+1]) || filepath.Clean(args[i+1]) != args[i+1] {
				return unsealed("-e needs a clean absolute path of one reviewed file")
			}
			i++
			continue
		}
		if _, dup := seen[a]; dup {
			return unsealed("%s given twice", a)
		}
		switch {
		case a == "--mode" || a == "--session" || contains(optionFlags, a):
			if i+1 >= len(args) {
				return unsealed("%s has no value", a)
			}
			i++
			seen[a] = args[i]
		case contains(sealFlags, a):
			seen[a] = ""
		default:
			return unsealed("argument %q is not in the seal", a)
		}
	}
	if seen["--mode"] != "rpc" {
		return unsealed("--mode must be rpc")
	}
	for _, f := range sealFlags {
		if _, ok := seen[f]; !ok {
			return unsealed("%s is missing", f)
		}
	}
	sess, ok := seen["--session"]
	if !ok || !filepath.IsAbs(sess) || filepath.Clean(sess) != sess {
		return unsealed("--session needs a clean absolute path, got %q", sess)
	}
	for _, f := range optionFlags {
		if v, ok := seen[f]; ok && !plain(v) {
			return unsealed("%s value %q is not plain", f, v)
		}
	}
	return nil
}

// plain values cannot be mistaken by Pi's argument parser for a flag or a
// file argument (dist/cli/args.js:127,214).
func plain(v string) bool {
	return v != "" && !strings.HasPrefix(v, "-") && !strings.HasPrefix(v, "@") &&
		!strings.ContainsAny(v, "\x00\n\r")
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

func unsealed(format string, args ...any) error {
	return protocol.Refuse(protocol.CodeUnsealedEngine, format, args...)
}
