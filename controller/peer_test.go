package controller

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/mosaic-agents/mosaic/contrib/attack"
	"github.com/mosaic-agents/mosaic/protocol"
)

// engineCgroup returns the cgroupfs directory of the rig's engine (the
// leaf its processes live in) and the directory of the user manager's
// app.slice beside it.
func (r *rig) engineCgroup() (engine, appSlice string) {
	r.t.Helper()
	r.ctrl.mu.Lock()
	cg := r.ctrl.st.exec.handle.Cohort.Cgroup
	r.ctrl.mu.Unlock()
	engine = filepath.Join("/sys/fs/cgroup", cg)
	if _, err := os.Stat(filepath.Join(engine, "cgroup.procs")); err != nil {
		r.t.Fatalf("engine cgroup: %v", err)
	}
	i := strings.Index(cg, "/app.slice/")
	if i < 0 {
		r.t.Fatalf("engine cgroup %s is not below app.slice", cg)
	}
	return engine, filepath.Join("/sys/fs/cgroup", cg[:i+len("/app.slice")])
}

// inScope wraps an attack so that it runs as a process of the engine's
// scope, as an agent's tool child does: a shell moves itself into the
// engine's cgroup, then runs script with $ATTACK set to the binary.
func inScope(engine, script string) func(bin string) []string {
	return func(bin string) []string {
		return []string{"sh", "-c", fmt.Sprintf(`echo $$ > '%s/cgroup.procs' || exit 97; ATTACK='%s'; %s`, engine, bin, script)}
	}
}

// runAttack runs a mode and returns its report.
func (r *rig) runAttack(t testing.TB, mode string, wrap func(string) []string, env ...string) attack.Report {
	t.Helper()
	cmd, err := attack.Command(mode, r.sock, wrap, env...)
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("attack %s: %v\n%s", mode, err, out)
	}
	rep, err := attack.Parse(out)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Error != "" {
		t.Fatalf("attack %s failed: %s", mode, rep.Error)
	}
	return rep
}

// TestEnginePeerRoutes: every way an agent's tool child has to look like
// the operator ends in engine-peer, and control never moves: a process in
// another user and pid namespace (where the confined engine runs its
// tools), one that left the engine scope from inside its own namespaces,
// one started by a tool child in a scope of its own through the user
// manager (systemd-run --user --scope), one that left the scope while its
// parent stayed, one that made itself unreadable (non-dumpable), and a
// connection whose connecting process, judged at accept, exited after
// its welcome and left it to another. On the main before this change
// every one of them got control.
func TestEnginePeerRoutes(t *testing.T) {
	r := newRig(t, plainScript, nil)
	r.waitBinding("active")
	engine, app := r.engineCgroup()
	evil := filepath.Join(app, "evil-"+newID("")+".scope")
	t.Cleanup(func() { os.Remove(evil) })
	routes := []struct {
		name string
		mode string
		wrap func(string) []string
	}{
		{"another user and pid namespace", "takeover", func(bin string) []string {
			return []string{"unshare", "-Urp", "--fork", bin}
		}},
		{"left the scope from its own namespaces", "takeover", inScope(engine, fmt.Sprintf(
			`exec unshare -Urp --fork sh -c 'mkdir -p %s && echo $$ > %s/cgroup.procs && exec "$0"' "$ATTACK"`, evil, evil))},
		{"systemd-run --user --scope from a tool child", "takeover", inScope(engine,
			`systemd-run --user --scope --quiet "$ATTACK"; true`)},
		{"left the scope, parent inside", "takeover", inScope(engine, fmt.Sprintf(
			`sh -c 'mkdir -p %s && echo $$ > %s/cgroup.procs && exec "$0"' "$ATTACK"; true`, evil, evil))},
		{"non-dumpable outside any scope", "nodump-takeover", nil},
		// Judged at accept while alive and outside any scope; by the
		// takeover the connecting process is gone and another holds the
		// connection: only the judgement at the command sees it.
		{"connector gone after its welcome", "fork", nil},
	}
	for _, tt := range routes {
		t.Run(tt.name, func(t *testing.T) {
			gen := r.generation()
			rep := r.runAttack(t, tt.mode, tt.wrap, attack.EnvHello+"=welcome")
			if rep.Reply["record"] != "refusal" || rep.Reply["code"] != protocol.CodeEnginePeer {
				t.Fatalf("takeover from %s: %v; want refusal engine-peer", tt.name, rep.Reply)
			}
			if r.generation() != gen {
				t.Fatalf("generation moved from %v to %v", gen, r.generation())
			}
		})
	}
	// The operator still takes control.
	r.takeover(r.dial())
}

// TestForkRace: a tool child connects, hands the connection to a child of
// its own and exits, so the connecting process is gone when the child
// speaks (before this change its /proc was unreadable and the check said
// "not a peer": 15 wins in 300). Half the tries say hello before the
// exit, half after; a few run at once, as a busy tool would. None may gain
// control (a loser of a concurrent winner would see stale-generation).
func TestForkRace(t *testing.T) {
	r := newRig(t, plainScript, nil)
	r.waitBinding("active")
	engine, _ := r.engineCgroup()
	const tries, parallel = 300, 6
	var mu sync.Mutex
	wins := 0
	var wg sync.WaitGroup
	sem := make(chan struct{}, parallel)
	for i := 0; i < tries; i++ {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			rep := r.runAttack(t, "fork", inScope(engine, `exec "$ATTACK"`), attack.EnvHello+"="+fmt.Sprint(i%2))
			mu.Lock()
			defer mu.Unlock()
			switch {
			case rep.Reply["record"] == "control":
				wins++
			case rep.Reply["code"] != protocol.CodeEnginePeer && rep.Reply["code"] != protocol.CodeStaleGeneration:
				t.Errorf("try %d: %v; want refusal engine-peer", i, rep.Reply)
			}
		}()
	}
	wg.Wait()
	if wins > 0 {
		t.Fatalf("the fork race won control %d times in %d", wins, tries)
	}
}

// TestEnginePeerMayNotConfirm: an engine peer issues no confirmation, not
// even the one an observer may (acquire-recovery-control), and every
// control command refuses engine-peer, not only takeover.
func TestEnginePeerMayNotConfirm(t *testing.T) {
	r := newRig(t, plainScript, nil)
	r.waitBinding("active")
	engine, _ := r.engineCgroup()
	rep := r.runAttack(t, "confirm", inScope(engine, `exec "$ATTACK"`), attack.EnvN+"=50")
	if rep.Records["refusal:"+protocol.CodeEnginePeer] != 50 {
		t.Fatalf("issue-confirmation from an engine peer: %v; want 50 refusals engine-peer", rep.Records)
	}
	r.ctrl.mu.Lock()
	n := len(r.ctrl.confs)
	r.ctrl.mu.Unlock()
	if n != 0 {
		t.Fatalf("the controller keeps %d confirmations issued to an engine peer", n)
	}
}
