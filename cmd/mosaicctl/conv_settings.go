package main

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"math"
	"os"
	"runtime"
	"strings"
	"time"

	"github.com/mosaic-agents/mosaic/conversations"
	"github.com/mosaic-agents/mosaic/scopes"
	"github.com/mosaic-agents/mosaic/units"
)

// limitsFromFlags parses the limit flags of conv add with systemd's
// syntax for each property; a refusal names the flag, the value and an
// example.
func limitsFromFlags(memory, tasks, cpu string) (conversations.Limits, error) {
	var l conversations.Limits
	var err error
	if l.MemoryMax, err = conversations.ParseMemoryMax("--memory-max", memory); err != nil {
		return l, err
	}
	if l.TasksMax, err = conversations.ParseTasksMax("--tasks-max", tasks); err != nil {
		return l, err
	}
	if l.CPUQuota, err = conversations.ParseCPUQuota("--cpu-quota", cpu); err != nil {
		return l, err
	}
	// systemd takes any quota up to 21474836.47%; one above every CPU of
	// this machine never binds, which is worth saying, not refusing (the
	// conversation may move to a larger machine).
	if n := runtime.NumCPU(); l.CPUQuota.Share > conversations.Permyriad(n*10000) {
		fmt.Fprintf(os.Stderr, "mosaicctl: note: --cpu-quota %s is more than the %d CPUs of this machine (%d%%): it never limits the engine here\n",
			l.CPUQuota, n, n*100)
	}
	return l, nil
}

// showRunning appends to conv show what systemd holds for the live
// engine scopes of cv (read over D-Bus: the values in force, percentages
// resolved), as TOML comments so the output stays a valid conversation
// file, and says when configured limits that differ take effect.
func showRunning(ctx context.Context, w io.Writer, cv *conversations.Conversation) {
	mgr := scopes.NewManager(scopes.Config{})
	defer mgr.Close()
	units, err := mgr.EngineScopes(ctx, cv.ID)
	if err != nil {
		fmt.Fprintf(w, "\n# running engine: unknown (%v)\n", err)
		return
	}
	if len(units) == 0 {
		fmt.Fprintf(w, "\n# running engine: none (no live engine scope); the limits above apply at the next launch\n")
		return
	}
	for _, u := range units {
		a, err := mgr.Applied(ctx, u.Name)
		if err != nil {
			fmt.Fprintf(w, "\n# running engine %s: limits unknown (%v)\n", u.Name, err)
			continue
		}
		mem, tasks, cpu := appliedLimits(a)
		fmt.Fprintf(w, "\n# running engine %s, as systemd holds it (read over D-Bus):\n", u.Name)
		fmt.Fprintf(w, "#   memory_max = %q\n#   tasks_max = %q\n#   cpu_quota = %q\n", mem, tasks, cpu)
		if differs(cv.Limits, a) {
			fmt.Fprintf(w, "# the configured limits differ: they apply at the next launch (%s)\n", relaunchCommands(cv.ID))
		}
	}
}

// appliedLimits prints what systemd reports in the configuration's
// syntax: "infinity" for no limit, sizes with the largest exact suffix.
func appliedLimits(a scopes.Applied) (mem, tasks, cpu string) {
	mem, tasks, cpu = "infinity", "infinity", "none"
	if a.MemoryMax != math.MaxUint64 {
		mem = conversations.MemoryMax{Bytes: a.MemoryMax}.String()
	}
	if a.TasksMax != math.MaxUint64 {
		tasks = conversations.TasksMax{Count: a.TasksMax}.String()
	}
	if a.CPUQuotaPerSecUSec != math.MaxUint64 {
		if a.CPUQuotaPerSecUSec%100 == 0 {
			cpu = conversations.Permyriad(a.CPUQuotaPerSecUSec / 100).String()
		} else {
			cpu = fmt.Sprintf("%dus per second", a.CPUQuotaPerSecUSec)
		}
	}
	return mem, tasks, cpu
}

// differs reports whether the configured limits would launch with other
// values than a holds. A percentage, and an unset TasksMax= (the
// manager's DefaultTasksMax=), are resolved by systemd and not compared.
func differs(l conversations.Limits, a scopes.Applied) bool {
	mem, tasks, cpu := appliedLimits(a)
	switch m := l.MemoryMax; {
	case m.Share > 0:
	case !m.IsSet():
		if mem != "infinity" {
			return true
		}
	case mem != m.String():
		return true
	}
	if k := l.TasksMax; k.Share == 0 && k.IsSet() && tasks != k.String() {
		return true
	}
	return cpu != cmp.Or(l.CPUQuota.String(), "none")
}

// relaunchCommands is how a running engine of id takes up new settings:
// a proven stop, then a launch on the same session. Both need control,
// and the stop consent, so the flags are part of the commands.
func relaunchCommands(id string) string {
	return fmt.Sprintf("`mosaicctl stop --take --yes %s`, then `mosaicctl recover --take %s`", id, id)
}

// runningEngine is what conv add --replace found of the conversation's
// engine: whether one runs, or why it could not tell (err); and whether
// it restarted the controller for the change (restartIdle), or why that
// failed.
type runningEngine struct {
	live       bool
	err        error
	restarted  bool
	restartErr error
}

// restartIdle restarts the conversation's controller after a replace
// when it runs no engine and would otherwise never read the change: one
// that never launched (no claim of its own: a controller launches only
// when it starts, so a conversation added without an engine stayed
// without one) or whose workspace changed (the claim's keys are the
// controller's from its start). A controller with a claim of its own
// launches again only at a recover, which reads the settings anew, so it
// is left alone with its clients. Only an active controller is
// restarted, only one started before the settings were saved (saved: a
// client may have started one since, which read them and may be
// launching), and only with no engine scope alive: nothing runs to end.
// The claim is read from the default claim root, the one the installed
// units' controllers use.
func restartIdle(ctx context.Context, old, cv *conversations.Conversation, saved time.Time, run *runningEngine) {
	if run.err != nil || run.live {
		return
	}
	if old.Workspace == cv.Workspace {
		r, err := seatClaim(ctx, "", cv)
		if err != nil {
			run.restartErr = err
			return
		}
		if r != nil && r.Conversation == cv.ID {
			return
		}
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	run.restarted, run.restartErr = units.RestartStale(ctx, units.ServiceUnit(cv.ID), saved)
}

// engineRunning asks the user manager whether an engine scope of id is
// alive, so the replace report names a stop only when there is one.
func engineRunning(ctx context.Context, id string) runningEngine {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	mgr := scopes.NewManager(scopes.Config{})
	defer mgr.Close()
	live, err := mgr.EngineScopes(ctx, id)
	return runningEngine{live: len(live) > 0, err: err}
}

// reportReplace says on w what conv add --replace changed and when each
// change takes effect, so nobody believes a running engine was changed.
func reportReplace(w io.Writer, old, cv *conversations.Conversation, run runningEngine) {
	var limits, engine, env, identity []string
	diff := func(list *[]string, key, a, b string) {
		if a != b {
			*list = append(*list, fmt.Sprintf("  %s: %s -> %s", key, cmp.Or(a, "(unset)"), cmp.Or(b, "(unset)")))
		}
	}
	diff(&limits, "limits.memory_max", old.Limits.MemoryMax.String(), cv.Limits.MemoryMax.String())
	diff(&limits, "limits.tasks_max", old.Limits.TasksMax.String(), cv.Limits.TasksMax.String())
	diff(&limits, "limits.cpu_quota", old.Limits.CPUQuota.String(), cv.Limits.CPUQuota.String())
	oe, ne := old.Engine, cv.Engine
	diff(&engine, "engine.entry", oe.Entry, ne.Entry)
	diff(&engine, "engine.version", oe.Version, ne.Version)
	diff(&engine, "engine.sha256", oe.SHA256, ne.SHA256)
	diff(&engine, "engine.package_digest", oe.PackageDigest, ne.PackageDigest)
	diff(&engine, "engine.node", oe.Node, ne.Node)
	diff(&engine, "engine.node_version", oe.NodeVersion, ne.NodeVersion)
	diff(&engine, "engine.node_sha256", oe.NodeSHA256, ne.NodeSHA256)
	diff(&engine, "engine.provider", oe.Provider, ne.Provider)
	diff(&engine, "engine.model", oe.Model, ne.Model)
	diff(&engine, "engine.thinking", oe.Thinking, ne.Thinking)
	diff(&engine, "engine.extensions", extensionsText(oe.Extensions), extensionsText(ne.Extensions))
	diff(&env, "engine.agent_dir", oe.AgentDir, ne.AgentDir)
	diff(&env, "engine.path", oe.Path, ne.Path)
	diff(&env, "devices", strings.Join(old.Devices, " "), strings.Join(cv.Devices, " "))
	diff(&identity, "workspace", old.Workspace, cv.Workspace)
	id := cv.ID
	if len(limits)+len(env) > 0 {
		fmt.Fprintf(w, "mosaicctl: replaced in %s:\n%s\n", id, strings.Join(append(limits, env...), "\n"))
		switch {
		case run.err != nil:
			fmt.Fprintf(w, "mosaicctl: these apply at the next launch of the engine; whether one runs is unknown (%v): if `mosaicctl status %s` shows one,\n"+
				"  it keeps its old values until %s\n", run.err, id, relaunchCommands(id))
		case run.live:
			fmt.Fprintf(w, "mosaicctl: these apply at the next launch of the engine; the running engine keeps its old values until then:\n"+
				"  %s (`mosaicctl conv show %s` shows what the running engine has)\n", relaunchCommands(id), id)
		default:
			fmt.Fprintf(w, "mosaicctl: these apply at the next launch of the engine; none runs now\n")
		}
	}
	if len(engine) > 0 {
		fmt.Fprintf(w, "mosaicctl: replaced the engine or its arguments of %s:\n%s\n", id, strings.Join(engine, "\n"))
		launch := fmt.Sprintf("its controller launches when it starts:\n"+
			"  if `mosaicctl status %s` shows the controller active and no engine, `systemctl --user restart %s`", id, units.ServiceUnit(id))
		if run.restarted {
			launch = "its controller, which ran none, was restarted for it and launches it now"
		}
		fmt.Fprintf(w, "mosaicctl: they apply at the next launch of a conversation that never ran (%s); once an execution of %s ran,\n"+
			"  its claim pins the engine it ran and `mosaicctl recover` refuses engine-pin-mismatch until they are back as they were\n", launch, id)
	}
	if len(identity) > 0 {
		fmt.Fprintf(w, "mosaicctl: replaced in %s:\n%s\n", id, strings.Join(identity, "\n"))
		restart := fmt.Sprintf("`systemctl --user restart %s`", units.ServiceUnit(id))
		if run.live || run.err != nil {
			// The claim of the old workspace holds the running engine:
			// it ends with a proof first.
			restart = fmt.Sprintf("`mosaicctl stop --take --yes %s`, then %s", id, restart)
		}
		if run.restarted {
			fmt.Fprintf(w, "mosaicctl: the workspace keys the conversation's claim: its controller, which ran no engine, was restarted for it\n")
		} else {
			fmt.Fprintf(w, "mosaicctl: the workspace keys the conversation's claim: it applies when its controller restarts:\n  %s\n", restart)
		}
	}
	switch {
	case run.restartErr != nil:
		fmt.Fprintf(w, "mosaicctl: the controller of %s runs no engine, and restarting it for the change failed (%v): `systemctl --user restart %s`\n",
			id, run.restartErr, units.ServiceUnit(id))
	case run.restarted:
		fmt.Fprintf(w, "mosaicctl: restarted %s (it ran no engine): it read the new settings at its start\n", units.ServiceUnit(id))
	}
}

// extensionsText lists pinned extensions for a replace report.
func extensionsText(exts []conversations.Extension) string {
	var parts []string
	for _, e := range exts {
		parts = append(parts, e.Path+" ("+e.SHA256[:min(12, len(e.SHA256))]+")")
	}
	return strings.Join(parts, ", ")
}
