package main

import (
	"cmp"
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/mosaic-agents/mosaic/conversations"
	"github.com/mosaic-agents/mosaic/engine/claude"
	"github.com/mosaic-agents/mosaic/engine/pi"
)

// checkPins runs the launch's own pin check (pi.Check) on every
// registered conversation: a conversation whose engine or interpreter
// changed since `conv add` refuses engine-pin-mismatch at its next launch,
// so doctor says so first, with the command that re-pins it. A file that
// does not load fails too: its conversation cannot start.
func checkPins(ctx context.Context) (string, error) {
	list, bad, err := registered()
	if err != nil {
		return "", err
	}
	if len(list) == 0 && len(bad) == 0 {
		return "no conversations registered", nil
	}
	// Conversations usually share one engine: check each pin once.
	checked := map[pi.Pin]error{}
	var problems, fixes []string
	versions := map[string]bool{}
	for _, cv := range list {
		if err := ctx.Err(); err != nil {
			return "", fmt.Errorf("checked %d of %d conversations: %w", len(checked), len(list), err)
		}
		if cv.IsClaude() {
			if err := claude.Check(cv.ClaudeConfig(claude.Dirs{}, nil).Pin); err != nil {
				problems = append(problems, fmt.Sprintf("%s: %v", cv.ID, err))
				fixes = append(fixes, "pin "+cv.ID+" again with `mosaicctl conv add --project "+shellQuote(cv.Project)+" --seat "+shellQuote(cv.Seat)+
					" --engine-kind claude --engine PATH --resume-session "+cv.SessionKey()+" --replace` (its other flags as before)")
				continue
			}
			versions["Claude Code "+cv.Claude.Version] = true
			continue
		}
		if cv.Engine.Path == "" && cv.Engine.Entry == "" {
			// Registered without an engine (no pi on PATH at `conv add`):
			// there is no pin to check, and an empty one would be read
			// relative to this process's directory (its package.json).
			problems = append(problems, fmt.Sprintf("%s: no engine (it was added with no --engine and no pi on PATH), so its controller launches nothing", cv.ID))
			fixes = append(fixes, repinCommand(cv)+" (PATH: the pi executable)")
			continue
		}
		p := cv.Engine.Pin()
		err, done := checked[p]
		if !done {
			err = pi.Check(p)
			checked[p] = err
		}
		if err == nil {
			// The launch checks each admitted extension too
			// (pi.Command): a file changed since `conv add` refuses it.
			for _, x := range cv.Engine.Pins() {
				if err = pi.CheckExtension(x); err != nil {
					break
				}
			}
		}
		if err != nil {
			problems = append(problems, fmt.Sprintf("%s: %v", cv.ID, err))
			fixes = append(fixes, repinCommand(cv))
			continue
		}
		if p.NodeVersion != "" {
			versions[fmt.Sprintf("Pi %s on Node %s", p.Version, p.NodeVersion)] = true
		} else {
			versions[fmt.Sprintf("Pi %s run by %s", p.Version, p.Node)] = true
		}
	}
	ids := make([]string, 0, len(bad))
	for id := range bad {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		// The refusal names the file and both fixes (conversations.Load).
		problems = append(problems, fmt.Sprintf("%s: %v", id, bad[id]))
	}
	if len(bad) > 0 {
		fixes = append(fixes, "mend each file that does not load or remove its conversation, as each says")
	}
	if len(problems) > 0 {
		return "", failf("check that each change is yours, then "+strings.Join(fixes, "; "),
			"%d of %d conversations cannot launch: %s", len(problems), len(list)+len(bad), strings.Join(problems, "; "))
	}
	n := fmt.Sprintf("%d conversations", len(list))
	if len(list) == 1 {
		n = "1 conversation"
	}
	return fmt.Sprintf("%s; engine and interpreter pins match (%s)", n, strings.Join(sortedKeys(versions), ", ")), nil
}

// registered lists the conversations of the default store, and those
// whose files do not load.
func registered() ([]*conversations.Conversation, map[string]error, error) {
	s, err := conversations.Open()
	if err != nil {
		return nil, nil, err
	}
	return s.List()
}

// repinCommand is the `conv add --replace` that pins cv's engine again
// with every other setting as it is.
func repinCommand(cv *conversations.Conversation) string {
	e := cv.Engine
	path := cmp.Or(e.Path, e.Entry, "PATH")
	args := []string{"mosaicctl", "conv", "add", "--project", cv.Project, "--seat", cv.Seat, "--session", cv.Session}
	if cv.Workspace != "" && cv.Workspace != conversations.DefaultWorkspace {
		args = append(args, "--workspace", cv.Workspace)
	}
	opt := func(flag, v string) {
		if v != "" {
			args = append(args, flag, v)
		}
	}
	opt("--engine", path)
	opt("--provider", e.Provider)
	opt("--model", e.Model)
	opt("--thinking", e.Thinking)
	opt("--agent-dir", e.AgentDir)
	opt("--memory-max", cv.Limits.MemoryMax.String())
	opt("--tasks-max", cv.Limits.TasksMax.String())
	opt("--cpu-quota", cv.Limits.CPUQuota.String())
	opt("--idle-stop", cv.IdleStop)
	for _, d := range cv.Devices {
		opt("--device", d)
	}
	// --replace keeps only what is given: without them the extensions
	// would be dropped.
	for _, x := range e.Extensions {
		opt("--extension", x.Path)
	}
	args = append(args, "--replace")
	for i, a := range args {
		args[i] = shellQuote(a)
	}
	return "`" + strings.Join(args, " ") + "`"
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
