package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mosaic-agents/mosaic/contrib/sandboxtest"
	"github.com/mosaic-agents/mosaic/contrib/stubmodel"
)

// wire is a minimal protocol client for the end-to-end test.
type wire struct {
	t    *testing.T
	c    net.Conn
	recs chan map[string]any
	n    int
}

func dialWire(t *testing.T, path string) *wire {
	t.Helper()
	c, err := net.DialTimeout("unix", path, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	w := &wire{t: t, c: c, recs: make(chan map[string]any, 8192)}
	go func() {
		sc := bufio.NewScanner(c)
		sc.Buffer(make([]byte, 1<<20), 16<<20)
		for sc.Scan() {
			var m map[string]any
			if json.Unmarshal(sc.Bytes(), &m) == nil {
				w.recs <- m
			}
		}
		close(w.recs)
	}()
	w.send(map[string]any{"type": "hello", "client": "e2e"})
	w.await(func(m map[string]any) bool { return m["record"] == "welcome" })
	return w
}

func (w *wire) send(v map[string]any) {
	w.t.Helper()
	b, _ := json.Marshal(v)
	if _, err := w.c.Write(append(b, '\n')); err != nil {
		w.t.Fatal(err)
	}
}

func (w *wire) await(pred func(map[string]any) bool) map[string]any {
	w.t.Helper()
	deadline := time.After(60 * time.Second)
	for {
		select {
		case m, ok := <-w.recs:
			if !ok {
				w.t.Fatal("connection closed while waiting")
			}
			if pred(m) {
				return m
			}
		case <-deadline:
			w.t.Fatal("no matching record within the bound")
		}
	}
}

// do sends a command with a fresh request id and returns its final record,
// failing unless it is a want record.
func (w *wire) do(cmd map[string]any, want string) map[string]any {
	w.t.Helper()
	w.n++
	req := fmt.Sprintf("e2e-%d", w.n)
	cmd["request"] = req
	w.send(cmd)
	m := w.await(func(m map[string]any) bool {
		return m["request"] == req && m["record"] != "stop" && m["record"] != "binding"
	})
	if m["record"] != want {
		w.t.Fatalf("%v: got %v, want %s", cmd["type"], m, want)
	}
	return m
}

func (w *wire) settled() {
	w.t.Helper()
	w.await(func(m map[string]any) bool { return m["record"] == "event" && m["kind"] == "run-settled" })
}

// TestEndToEndRealPi is the whole path on the sandbox's real systemd with
// the real pinned Pi and the stub model: socket activation, two clients,
// takeover, a prompt into a tool call whose child calls setsid, a
// confirmed force stop with a proof that `mosaicctl proof verify` and
// `mosaicctl audit` accept, recover, launch, and a second prompt.
func TestEndToEndRealPi(t *testing.T) {
	sandboxtest.Require(t)
	bin := sandboxtest.Bin(t, "mosaicctl")
	pi := os.Getenv("MOSAIC_PI")
	if pi == "" {
		sandboxtest.Unavailable(t, "MOSAIC_PI is not set: `make test` installs the pinned Pi")
	}
	stub, err := stubmodel.Start(stubmodel.Script{Turns: []stubmodel.Turn{
		{Text: []string{"Starting ", "a tool."}, Tool: &stubmodel.ToolCall{Command: "setsid sleep 300 & echo $! > child.pid; echo started"}},
		{Text: []string{"The tool ", "said started."}},
		{Text: []string{"Back ", "again."}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stub.Close() })
	model, err := stubmodel.WriteAgentDir(t.TempDir(), stub.BaseURL())
	if err != nil {
		t.Fatal(err)
	}
	mustRun(t, bin, "install")
	t.Cleanup(func() { run(t, bin, "uninstall", "--force") })
	proj, session := project(t, "e2e")
	id := strings.TrimSpace(mustRun(t, bin, "conv", "add", "--project", proj, "--seat", "e2e", "--session", session,
		"--engine", pi, "--provider", model.Provider, "--model", model.Model, "--agent-dir", model.AgentDir))
	sock, svc := "mosaic-conv@"+id+".socket", "mosaic-conv@"+id+".service"
	mustRun(t, "systemctl", "--user", "start", sock)
	t.Cleanup(func() { run(t, "systemctl", "--user", "stop", sock, svc) })
	path := filepath.Join(os.Getenv("XDG_RUNTIME_DIR"), "mosaic", "conv", id+".sock")

	ctl, obs := dialWire(t, path), dialWire(t, path)
	o := ctl.do(map[string]any{"type": "observe"}, "observed")
	for o["binding"].(map[string]any)["state"] != "active" {
		ctl.await(func(m map[string]any) bool { return m["record"] == "binding" && m["state"] == "active" })
		o = ctl.do(map[string]any{"type": "observe"}, "observed")
	}
	obs.do(map[string]any{"type": "observe"}, "observed")
	b := o["binding"].(map[string]any)
	if b["cohort"] != "scope" || !strings.HasPrefix(fmt.Sprint(b["scope"]), "mosaic-engine-") {
		t.Fatalf("binding %v: want the engine in a mosaic-engine scope", b)
	}
	gen := ctl.do(map[string]any{"type": "takeover", "generation": b["generation"]}, "control")["generation"]

	rc := ctl.do(map[string]any{"type": "prompt", "generation": gen, "text": "run the tool"}, "receipt")
	if rc["state"] != "acknowledged" {
		t.Fatalf("receipt %v", rc)
	}
	// E1 on the real Pi: the observer sees the tool and the new answer.
	var text strings.Builder
	sawTool := false
	obs.await(func(m map[string]any) bool {
		if m["kind"] == "tool-end" {
			sawTool = true
		}
		if s, ok := m["text"].(string); ok && m["kind"] == "text-delta" {
			text.WriteString(s)
		}
		return m["kind"] == "run-settled"
	})
	ctl.settled()
	if !sawTool || !strings.Contains(text.String(), "said started.") {
		t.Fatalf("observer saw tool %v and text %q", sawTool, text.String())
	}
	pidb, err := os.ReadFile(filepath.Join(proj, "child.pid"))
	if err != nil {
		t.Fatalf("the tool's setsid child left no pid: %v", err)
	}
	child := strings.TrimSpace(string(pidb))
	if cg, err := os.ReadFile("/proc/" + child + "/cgroup"); err != nil || !strings.Contains(string(cg), "mosaic-engine-") {
		t.Fatalf("setsid child %s is not in the engine scope: %q %v", child, cg, err)
	}

	cf := ctl.do(map[string]any{"type": "issue-confirmation", "operation": "force-stop", "generation": gen}, "confirmation")
	if !strings.Contains(fmt.Sprint(cf["intent"]), "sleep") {
		t.Errorf("the confirmation does not show what will be stopped: %q", cf["intent"])
	}
	ctl.do(map[string]any{"type": "answer-confirmation", "confirmation": cf["id"], "answer": "confirm"}, "confirmation")
	ctl.send(map[string]any{"type": "force-stop", "request": "fs", "generation": gen, "confirmation": cf["id"]})
	stop := ctl.await(func(m map[string]any) bool { return m["record"] == "stop" && m["state"] == "stopped" })
	ctl.await(func(m map[string]any) bool { return m["request"] == "fs" && m["record"] == "receipt" })
	if _, err := os.Stat("/proc/" + child); err == nil {
		t.Fatalf("the setsid child %s survived the force stop", child)
	}
	proofFile := filepath.Join(t.TempDir(), "proof.json")
	raw, _ := json.Marshal(stop["proof"])
	os.WriteFile(proofFile, raw, 0o600)
	if out := mustRun(t, bin, "proof", "verify", proofFile); !strings.Contains(out, "verified: all") {
		t.Fatalf("proof verify said %q", out)
	}

	rcf := ctl.do(map[string]any{"type": "issue-confirmation", "operation": "recover", "generation": gen}, "confirmation")
	ctl.do(map[string]any{"type": "answer-confirmation", "confirmation": rcf["id"], "answer": "confirm"}, "confirmation")
	el := ctl.do(map[string]any{"type": "recover", "generation": gen, "confirmation": rcf["id"]}, "eligibility")
	lr := ctl.do(map[string]any{"type": "launch", "generation": gen, "eligibility": el["id"]}, "receipt")
	if lr["state"] != "launched" {
		t.Fatalf("launch %v", lr)
	}
	ctl.do(map[string]any{"type": "observe"}, "observed")
	rc = ctl.do(map[string]any{"type": "prompt", "generation": lr["generation"], "text": "again"}, "receipt")
	if rc["state"] != "acknowledged" {
		t.Fatalf("second prompt %v", rc)
	}
	ctl.settled()

	out := mustRun(t, bin, "audit", id)
	if !strings.Contains(out, "proof "+fmt.Sprint(stop["proofDigest"])+": verified") || !strings.Contains(out, "takeover") {
		t.Fatalf("audit output lacks the verified proof or the takeover:\n%s", out)
	}
}
