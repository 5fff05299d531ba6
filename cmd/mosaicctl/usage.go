package main

import (
	"cmp"
	"errors"
	"fmt"
	"strings"

	"github.com/mosaic-agents/mosaic/conversations"
	"github.com/mosaic-agents/mosaic/protocol"
	"github.com/mosaic-agents/mosaic/terminal"
	"github.com/urfave/cli/v2"
)

func usageError(format string, args ...any) error {
	return protocol.Refuse(protocol.CodeUsage, format, args...)
}

// notAnID is the one message every verb gives for a malformed id, with the
// code `conv show` gets from the store for the same id.
func notAnID(id string) error {
	if low := strings.ToLower(id); low != id && conversations.ValidID(low) {
		// An id read aloud or copied through something that shouts.
		return protocol.Refuse(protocol.CodeUnknownConv,
			"%q is not a conversation id: ids are lower case (did you mean %s?); see `mosaicctl conv list`", id, low)
	}
	return protocol.Refuse(protocol.CodeUnknownConv,
		"%q is not a conversation id (pi- and 20 hex digits); see `mosaicctl conv list`", id)
}

// idArg returns the one argument of a command that takes exactly one
// conversation id.
func idArg(c *cli.Context) (string, error) {
	if c.NArg() != 1 {
		return "", usageError("`%s` wants exactly one conversation id, got %d arguments; see `mosaicctl conv list`",
			c.Command.HelpName, c.NArg())
	}
	id := c.Args().First()
	if !conversations.ValidID(id) {
		return "", notAnID(id)
	}
	return id, nil
}

// strict makes every command of app refuse a bad command line with one
// line naming the fix instead of printing its help: an unparsable or
// unknown flag, a missing required flag (checked here so the error comes
// first; urfave/cli v2 prints the whole help before it). It recurses into
// subcommands.
func strict(cmds []*cli.Command, parent string) {
	for _, cmd := range cmds {
		name := parent + " " + cmd.Name
		cmd.OnUsageError = func(_ *cli.Context, err error, _ bool) error {
			return usageError("%s; see `%s --help`", flagError(err, cmd.Flags), name)
		}
		if req := takeRequired(cmd.Flags); len(req) > 0 {
			before := cmd.Before
			cmd.Before = func(c *cli.Context) error {
				var missing []string
				for _, f := range req {
					if !c.IsSet(f) {
						missing = append(missing, "--"+f)
					}
				}
				if len(missing) > 0 {
					return usageError("`%s` needs %s; see `%s --help`", name, strings.Join(missing, ", "), name)
				}
				if before != nil {
					return before(c)
				}
				return nil
			}
		}
		if cmd.ArgsUsage == "" && cmd.Action != nil && len(cmd.Subcommands) == 0 && !ownArgCheck[name] {
			// A command that takes no arguments refuses one instead of
			// dropping it: `mosaicctl install global` must not install
			// for this user alone, nor `conv add ~/src/app --seat …`
			// register without the project meant.
			before := cmd.Before
			cmd.Before = func(c *cli.Context) error {
				if c.NArg() > 0 {
					return usageError("`%s` takes no arguments, got %q; see `%s --help`", name, c.Args().Slice(), name)
				}
				if before != nil {
					return before(c)
				}
				return nil
			}
		}
		strict(cmd.Subcommands, name)
	}
}

// ownArgCheck are the commands without arguments that word their own
// refusal of one (doctor names its checks).
var ownArgCheck = map[string]bool{"mosaicctl doctor": true}

// takeRequired clears the Required mark of cmd's flags and returns their
// names, so the check runs in strict's Before instead of urfave/cli's.
func takeRequired(flags []cli.Flag) []string {
	var names []string
	for _, f := range flags {
		switch f := f.(type) {
		case *cli.StringFlag:
			if f.Required {
				f.Required = false
				f.Usage += " (required)"
				names = append(names, f.Name)
			}
		case *cli.PathFlag:
			if f.Required {
				f.Required = false
				f.Usage += " (required)"
				names = append(names, f.Name)
			}
		}
	}
	return names
}

// withHint adds to a refusal what a one-shot verb's user can do about it,
// as a command that works as typed.
func withHint(err error, verb, id string) error {
	var r *protocol.Refusal
	if !errors.As(err, &r) {
		return err
	}
	hint := ""
	switch r.Code {
	case protocol.CodeNotController:
		if strings.Contains(r.Message, "pass --take") {
			break // the verb refused it itself, naming every fix (stop)
		}
		example := fmt.Sprintf("mosaicctl %s --take %s", verb, id)
		switch verb {
		case "prompt":
			example += " TEXT"
		case "queue cancel":
			example += " ITEM"
		case "queue edit":
			example += " ITEM TEXT"
		case "stop":
			example = "mosaicctl stop --take --yes " + id
		}
		hint = fmt.Sprintf("pass --take to take control first: `%s`", example)
	case protocol.CodeStaleGeneration, protocol.CodeRevoked:
		// Two clients raced for control: this one lost between its
		// takeover and its command, which was refused and did nothing.
		hint = fmt.Sprintf("nothing was done: another client took control meanwhile (`mosaicctl attach %s` shows what it does); run the command again to take control back", id)
	case protocol.CodeNoEngine:
		if !strings.Contains(r.Message, restartCommand(id)) { // withNotLaunched said it all
			hint = noEngineHint(id, nil)
		}
	}
	if hint == "" || strings.Contains(r.Message, hint) {
		return err
	}
	// The hint belongs to the refusal's own line: what follows a newline
	// is the engine's end and its stderr (withEngineEnd), where a hint
	// would read as the engine's last words.
	line, rest, _ := strings.Cut(r.Message, "\n")
	if rest != "" {
		rest = "\n" + rest
	}
	return &protocol.Refusal{Code: r.Code, Message: line + "; " + hint + rest}
}

// noEngineHint says how to give conversation id an engine when its
// settings have none, with its own project, seat and session filled in;
// when they name one, the engine is not running and status says why.
// For a binding that never launched (idle, non-nil) it gives the reason
// its controller gave and ends in the restart that launches: a controller
// launches only when it starts, so a fixed setting waits for that.
func noEngineHint(id string, idle *protocol.Binding) string {
	s, err := conversations.Open()
	if err != nil {
		return ""
	}
	cv, err := s.Load(id)
	if err != nil {
		return ""
	}
	restart := ""
	if idle != nil {
		restart = fmt.Sprintf(", then `%s` (a controller launches its engine when it starts; none runs, so the restart ends nothing)", restartCommand(id))
	}
	path, pinned := cv.Engine.Path, cv.Engine.Path != ""
	if cv.IsClaude() {
		path, pinned = cv.Claude.Path, true // conv add always pins a Claude binary
	}
	if pinned && idle != nil && strings.Contains(idle.AdmissionReason, "has no engine") {
		// The controller read the file before an engine was added to it
		// (conv add --replace): its reason is about the old settings.
		return fmt.Sprintf("the controller still runs with the settings it started with, which had no engine (%s); "+
			"the engine %s added since applies when it restarts: `%s` (none runs, so the restart ends nothing)",
			terminal.SanitizeLine(idle.AdmissionReason), path, restartCommand(id))
	}
	if pinned && idle != nil {
		why := cmp.Or(terminal.SanitizeLine(idle.AdmissionReason), "see `mosaicctl status "+id+" --json`")
		return fmt.Sprintf("the controller did not launch the engine %s: %s; fix that%s", path, why, restart)
	}
	if pinned {
		return fmt.Sprintf("the engine %s is not running; see `mosaicctl status %s`", path, id)
	}
	cmd := fmt.Sprintf("mosaicctl conv add --engine PATH --replace --project %s --seat %s --workspace %s --session %s",
		shellQuote(cv.Project), shellQuote(cv.Seat), shellQuote(cv.Workspace), shellQuote(cv.Session))
	for _, f := range [][2]string{{"provider", cv.Engine.Provider}, {"model", cv.Engine.Model},
		{"thinking", cv.Engine.Thinking}, {"agent-dir", cv.Engine.AgentDir}} {
		if f[1] != "" {
			cmd += " --" + f[0] + " " + shellQuote(f[1])
		}
	}
	// conv add --replace restarts a controller that never launched
	// (restartIdle): the add is the whole fix.
	return fmt.Sprintf("conversation %s has no engine; add one with `%s` (PATH: the pi executable; add your limits again, `mosaicctl conv show %s` lists them; it restarts a controller that never launched, so that it launches the engine)",
		id, cmd, id)
}

// shellQuote quotes s for a POSIX shell when it needs it.
func shellQuote(s string) string {
	if s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_./=:@+,", r))
	}) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// fencedFix adds to a takeover refused fenced the mosaicctl command that
// gets past the fence, judged by the binding the verb saw: the
// controller's words name the protocol's way (acquire-recovery-control),
// which only stop and recover take, and which is no fix at all while a
// stop or an interrupt is still running.
func fencedFix(err error, id string, b *protocol.Binding) error {
	var r *protocol.Refusal
	if !errors.As(err, &r) {
		return err
	}
	state := ""
	if b != nil {
		state = b.State
	}
	var fix string
	switch state {
	case protocol.BindingStopped:
		fix = fmt.Sprintf("the conversation is stopped with a proof: `mosaicctl recover --take %s` starts it again", id)
	case protocol.BindingUncertain:
		fix = fmt.Sprintf("the binding is uncertain: `mosaicctl stop --take --yes %s` proves the engine gone, then `mosaicctl recover --take %s` starts it again", id, id)
	case protocol.BindingLaunching:
		fix = fmt.Sprintf("the engine is starting: see `mosaicctl status %s`, then run this again", id)
	default:
		fix = fmt.Sprintf("a stop or an interrupt is running: it ends by itself; see `mosaicctl status %s`, then run this again", id)
	}
	out := *r
	out.Message += "; " + fix
	return &out
}

// flagError words the flag package's errors as the flags are typed: an
// unknown --sesion is "unknown flag --sesion (did you mean --session?)",
// not "flag provided but not defined: -sesion", which names a flag nobody
// typed; the nearest of the command's flags is named as a mistyped
// command's is.
func flagError(err error, flags []cli.Flag) string {
	msg := err.Error()
	if name, ok := strings.CutPrefix(msg, "flag provided but not defined: -"); ok {
		if len(name) == 1 {
			return "unknown flag -" + name
		}
		name = strings.TrimPrefix(name, "-")
		if n := nearestFlag(flags, name); n != "" {
			return fmt.Sprintf("unknown flag --%s (did you mean --%s?)", name, n)
		}
		return "unknown flag --" + name
	}
	return msg
}

// nearestFlag is the long name of flags closest to typed, within two
// edits, or "".
func nearestFlag(flags []cli.Flag, typed string) string {
	best, bestD := "", 3
	for _, f := range flags {
		for _, n := range f.Names() {
			if len(n) == 1 {
				continue // -h is one edit from any one letter
			}
			if d := edits(typed, n); d < bestD {
				best, bestD = n, d
			}
		}
	}
	return best
}

// nearest is the name of cmds closest to typed, within two edits, or "".
func nearest(cmds []*cli.Command, typed string) string {
	best, bestD := "", 3
	for _, c := range cmds {
		if c.Hidden {
			continue
		}
		for _, n := range c.Names() {
			if d := edits(typed, n); d < bestD {
				best, bestD = c.Name, d
			}
		}
	}
	return best
}

// edits is the Levenshtein distance of a and b (both short: command names).
func edits(a, b string) int {
	prev := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur := make([]int, len(b)+1)
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev = cur
	}
	return prev[len(b)]
}
