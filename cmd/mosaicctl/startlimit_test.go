package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mosaic-agents/mosaic/contrib/sandboxtest"
	"github.com/mosaic-agents/mosaic/protocol"
	"github.com/mosaic-agents/mosaic/units"
)

// TestStartLimitNamesTheReset: a controller that fails at start (a
// drop-in's ExecStart exits 2, as a panic would) is restarted until
// systemd's start limit holds its units failed, and from then on socket
// activation answers every client with a reset connection and nothing
// more. The verbs refuse start-limit naming the journal to read and the
// reset-failed that lets it start again (the next client restarts the
// failed socket and is told the same); status says so under its table;
// doctor's user-manager check fails naming both; once the cause is gone,
// the printed reset lets the next client in.
func TestStartLimitNamesTheReset(t *testing.T) {
	sandboxtest.Require(t)
	bin := sandboxtest.Bin(t, "mosaicctl")
	mustRun(t, bin, "install")
	t.Cleanup(func() { run(t, bin, "uninstall", "--force") })
	proj, session := project(t, "crash")
	id := strings.TrimSpace(mustRun(t, bin, "conv", "add", "--project", proj, "--seat", "crash", "--session", session))
	svc, sock := units.ServiceUnit(id), units.SocketUnit(id)
	t.Cleanup(func() {
		run(t, "systemctl", "--user", "stop", sock, svc)
		run(t, "systemctl", "--user", "reset-failed", sock, svc)
		run(t, bin, "conv", "rm", id)
	})
	home, err := os.UserHomeDir()
	if err != nil {
		t.Fatal(err)
	}
	dropin := filepath.Join(home, ".config", "systemd", "user", svc+".d")
	if err := os.MkdirAll(dropin, 0o755); err != nil {
		t.Fatal(err)
	}
	crash := "[Service]\nExecStart=\nExecStart=/bin/sh -c 'echo panic: at start >&2; exit 2'\nRestartSec=100ms\n"
	if err := os.WriteFile(filepath.Join(dropin, "crash.conf"), []byte(crash), 0o644); err != nil {
		t.Fatal(err)
	}
	mustRun(t, "systemctl", "--user", "daemon-reload")

	reset := "systemctl --user reset-failed " + svc + " " + sock
	for _, args := range [][]string{{"prompt", "--take", id, "hi"}, {"hello", id}} {
		// A failed socket is started again first, and says so.
		r := run(t, bin, args...)
		last := r.stderr[strings.LastIndex(strings.TrimSuffix(r.stderr, "\n"), "\n")+1:]
		if r.code != 2 || !strings.HasPrefix(last, "mosaicctl: "+protocol.CodeStartLimit+": ") {
			t.Fatalf("%s: exit %d, stderr %q; want refusal %s (exit 2)", args[0], r.code, r.stderr, protocol.CodeStartLimit)
		}
		for _, want := range []string{"systemd stopped starting " + svc, "`journalctl --user -u " + svc + " -n 30`", "`" + reset + "`"} {
			if !strings.Contains(r.stderr, want) {
				t.Fatalf("%s: %q; want it to name %q", args[0], r.stderr, want)
			}
		}
	}

	// status, which connects to nothing, says the same under its table.
	if out := mustRun(t, bin, "status", id); !strings.Contains(out, id+": systemd stopped starting "+svc) || !strings.Contains(out, "`"+reset+"`") {
		t.Fatalf("status:\n%s\nwant a line naming the start limit and %q", out, reset)
	}
	if st := mustRun(t, bin, "status", "--json", id); !strings.Contains(st, `"startLimit":true`) {
		t.Fatalf("status --json: %s; want startLimit true", st)
	}

	var rep struct{ Checks []checkResult }
	if err := json.Unmarshal([]byte(run(t, bin, "doctor", "--json").stdout), &rep); err != nil {
		t.Fatal(err)
	}
	found := false
	for _, c := range rep.Checks {
		if c.Name == "user-manager" {
			found = true
			if c.Verdict != verdictFail || !strings.Contains(c.Detail, "start-limit-hit") || !strings.Contains(c.Detail, id) || !strings.Contains(c.Fix, reset) {
				t.Fatalf("doctor's user-manager check: %+v; want a failure naming %s and %q", c, id, reset)
			}
		}
	}
	if !found {
		t.Fatal("doctor printed no user-manager check")
	}

	if err := os.RemoveAll(dropin); err != nil {
		t.Fatal(err)
	}
	mustRun(t, "systemctl", "--user", "daemon-reload")
	mustRun(t, "systemctl", strings.Fields(reset)[1:]...)
	if out := mustRun(t, bin, "hello", id); !strings.Contains(out, `"record":"welcome"`) {
		t.Fatalf("hello after the reset printed %q", out)
	}
}
