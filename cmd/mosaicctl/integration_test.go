package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mosaic-agents/mosaic/contrib/sandboxtest"
	"github.com/mosaic-agents/mosaic/conversations"
)

// These tests run the built mosaicctl against the sandbox's real systemd
// user manager, journald and D-Bus, as the non-root test user.

type result struct {
	stdout, stderr string
	code           int
}

func run(t *testing.T, name string, args ...string) result {
	t.Helper()
	return runCmd(t, exec.Command(name, args...))
}

func runCmd(t *testing.T, cmd *exec.Cmd) result {
	t.Helper()
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		code = ee.ExitCode()
	case err != nil:
		t.Fatalf("%v: %v", cmd.Args, err)
	}
	return result{out.String(), errb.String(), code}
}

func mustRun(t *testing.T, name string, args ...string) string {
	t.Helper()
	r := run(t, name, args...)
	if r.code != 0 {
		t.Fatalf("%s %v: exit %d\nstdout: %s\nstderr: %s", name, args, r.code, r.stdout, r.stderr)
	}
	return r.stdout
}

// project makes a project with a seat's sessions directory under the test
// user's home (what a real user has) and returns the session path.
func project(t *testing.T, seat string) (string, string) {
	t.Helper()
	home, _ := os.UserHomeDir()
	p, err := os.MkdirTemp(home, "proj-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(p) })
	sessions := filepath.Join(p, ".pi", "state", seat, "sessions")
	if err := os.MkdirAll(sessions, 0o755); err != nil {
		t.Fatal(err)
	}
	return p, filepath.Join(sessions, "main.jsonl")
}

func TestSkeletonOnRealSystemd(t *testing.T) {
	sandboxtest.Require(t)
	bin := sandboxtest.Bin(t, "mosaicctl")

	out := mustRun(t, bin, "install")
	if !strings.Contains(out, "written") || !strings.Contains(out, "reloaded the user manager") {
		t.Fatalf("install said %q", out)
	}
	t.Cleanup(func() { run(t, bin, "uninstall", "--force") })
	if out := mustRun(t, bin, "install"); !strings.Contains(out, "nothing changed") {
		t.Fatalf("second install said %q; want it to change nothing", out)
	}
	unitDir := filepath.Join(os.Getenv("HOME"), ".config", "systemd", "user")
	verify := run(t, "systemd-analyze", "--user", "verify",
		filepath.Join(unitDir, "mosaic-conv@.socket"), filepath.Join(unitDir, "mosaic-conv@.service"))
	if verify.code != 0 || strings.TrimSpace(verify.stdout+verify.stderr) != "" {
		t.Fatalf("systemd-analyze verify: exit %d: %s%s", verify.code, verify.stdout, verify.stderr)
	}

	proj, session := project(t, "alice")
	id := strings.TrimSpace(mustRun(t, bin, "conv", "add", "--project", proj, "--seat", "alice", "--session", session))
	if !conversations.ValidID(id) {
		t.Fatalf("conv add printed %q; want the id alone", id)
	}
	if again := strings.TrimSpace(mustRun(t, bin, "conv", "add", "--project", proj, "--seat", "alice", "--session", session)); again != id {
		t.Fatalf("the same conversation got id %q, then %q", id, again)
	}
	sock, svc := "mosaic-conv@"+id+".socket", "mosaic-conv@"+id+".service"
	mustRun(t, "systemctl", "--user", "start", sock)
	t.Cleanup(func() { endConversation(t, bin, id) })

	path := filepath.Join(os.Getenv("XDG_RUNTIME_DIR"), "mosaic", "conv", id+".sock")
	assertMode(t, path, os.ModeSocket|0o600)
	assertMode(t, filepath.Dir(path), os.ModeDir|0o700)
	if state := unitProp(t, svc, "ActiveState"); state != "inactive" {
		t.Fatalf("%s is %s before any client; an idle conversation must cost no process", svc, state)
	}

	var conns []string
	var pids []string
	for range 2 {
		var w map[string]any
		if err := json.Unmarshal([]byte(mustRun(t, bin, "hello", id)), &w); err != nil {
			t.Fatal(err)
		}
		if w["record"] != "welcome" || w["conversation"] != id || w["mode"] != "observer" {
			t.Fatalf("welcome %v", w)
		}
		conns = append(conns, w["connection"].(string))
		pids = append(pids, unitProp(t, svc, "MainPID"))
	}
	if conns[0] == conns[1] {
		t.Fatalf("two clients share connection id %s", conns[0])
	}
	if pids[0] != pids[1] || pids[0] == "0" {
		t.Fatalf("controller pids %v: want one process serving both clients", pids)
	}
	if n := strings.Count(mustRun(t, "systemctl", "--user", "list-units", "--no-legend", "--plain", "mosaic-conv@*.service"), ".service"); n != 1 {
		t.Fatalf("%d controller services running, want exactly 1", n)
	}
	if status := unitProp(t, svc, "StatusText"); !strings.Contains(status, "serving conversation "+id) {
		t.Fatalf("sd_notify STATUS = %q", status)
	}

	hellos := journalUntil(t, func(es []map[string]any) bool {
		return hasEntry(es, "MOSAIC_CONNECTION", conns[0]) && hasEntry(es, "MOSAIC_CONNECTION", conns[1])
	}, "-u", svc, "MOSAIC_EVENT=hello")
	for _, c := range conns {
		if !hasEntry(hellos, "MOSAIC_CONNECTION", c) {
			t.Fatalf("no hello entry for connection %s in `journalctl --user -u %s MOSAIC_EVENT=hello`: %v", c, svc, hellos)
		}
	}
	for _, e := range hellos {
		if e["MESSAGE_ID"] != "e8e56a1e55b04767a85bd32ecf7d03db" || e["MOSAIC_CONVERSATION"] != id {
			t.Fatalf("hello entry %v", e)
		}
	}
	for _, ev := range []string{"connect", "disconnect", "start"} {
		if len(journal(t, "-u", svc, "MOSAIC_EVENT="+ev)) == 0 {
			t.Errorf("no %s entry in the journal", ev)
		}
	}

	r := run(t, bin, "uninstall")
	if r.code == 0 || !strings.Contains(r.stderr, sock) {
		t.Fatalf("uninstall with an active socket: exit %d, %q; want a refusal naming %s", r.code, r.stderr, sock)
	}
	mustRun(t, "systemctl", "--user", "stop", sock, svc)
	if out := mustRun(t, bin, "uninstall"); !strings.Contains(out, "removed") {
		t.Fatalf("uninstall said %q", out)
	}
}

func TestInstallRefusesForeignUnit(t *testing.T) {
	sandboxtest.Require(t)
	bin := sandboxtest.Bin(t, "mosaicctl")
	dir := t.TempDir()
	foreign := filepath.Join(dir, "mosaic-conv@.service")
	os.WriteFile(foreign, []byte("[Service]\nExecStart=/bin/true\n"), 0o644)
	r := run(t, bin, "install", "--unit-dir", dir)
	if r.code == 0 || !strings.Contains(r.stderr, "--force") {
		t.Fatalf("install over a foreign unit: exit %d, %q", r.code, r.stderr)
	}
	if b, _ := os.ReadFile(foreign); string(b) != "[Service]\nExecStart=/bin/true\n" {
		t.Fatal("a refused install changed the foreign file")
	}
	if _, err := os.Stat(filepath.Join(dir, "mosaic-conv@.socket")); err == nil {
		t.Fatal("a refused install wrote the other file")
	}
}

func TestServeBadStarts(t *testing.T) {
	sandboxtest.Require(t)
	bin := sandboxtest.Bin(t, "mosaicctl")
	proj, session := project(t, "bob")
	id := strings.TrimSpace(mustRun(t, bin, "conv", "add", "--project", proj, "--seat", "bob", "--session", session))
	t.Cleanup(func() { run(t, bin, "conv", "rm", id) })

	// No activated socket and no --listen: refuse rather than guess.
	r := run(t, bin, "serve", "--conversation", id)
	if r.code == 0 || !strings.Contains(r.stderr, "systemctl --user start") {
		t.Fatalf("serve without a socket: exit %d, %q", r.code, r.stderr)
	}

	unknown := "pi-0123456789abcdef0123"
	r = run(t, bin, "serve", "--conversation", unknown, "--listen", filepath.Join(t.TempDir(), "s"))
	if r.code != 2 || !strings.Contains(r.stderr, "unknown-conversation") {
		t.Fatalf("serve of an unknown conversation: exit %d, %q", r.code, r.stderr)
	}
	if !journalHas(t, "MOSAIC_REFUSAL", "unknown-conversation", "MOSAIC_CONVERSATION="+unknown) {
		t.Fatal("the unknown-conversation refusal is not in the journal")
	}

	home, _ := os.UserHomeDir()
	cfg := filepath.Join(home, ".config", "mosaic", "conversations", id+".toml")
	b, err := os.ReadFile(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(cfg, append(b, "\nturbo = true\n"...), 0o600); err != nil {
		t.Fatal(err)
	}
	r = run(t, bin, "serve", "--conversation", id, "--listen", filepath.Join(t.TempDir(), "s"))
	if r.code != 2 || !strings.Contains(r.stderr, "configuration") || !strings.Contains(r.stderr, "turbo") {
		t.Fatalf("serve with an unknown config key: exit %d, %q; want configuration naming turbo", r.code, r.stderr)
	}
}

func TestPeerWithAnotherUID(t *testing.T) {
	env := sandboxtest.Require(t)
	bin := sandboxtest.Bin(t, "mosaicctl")
	proj, session := project(t, "carol")
	id := strings.TrimSpace(mustRun(t, bin, "conv", "add", "--project", proj, "--seat", "carol", "--session", session))
	t.Cleanup(func() { run(t, bin, "conv", "rm", id) })

	// A socket the second user can reach: only SO_PEERCRED stands between
	// it and the conversation, which is the check under test.
	dir, err := os.MkdirTemp("/tmp", "peer-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	os.Chmod(dir, 0o755)
	sock := filepath.Join(dir, "c.sock")
	srv := exec.Command(bin, "serve", "--conversation", id, "--listen", sock)
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Process.Signal(syscall.SIGTERM); srv.Wait() })
	waitFor(t, func() bool { _, err := os.Stat(sock); return err == nil })
	os.Chmod(sock, 0o666)

	r := runCmd(t, env.AsPeer(t, bin, "hello", "--socket", sock, id))
	if r.code != 2 || !strings.Contains(r.stderr, "peer-uid") {
		t.Fatalf("hello from the peer user: exit %d, stdout %q, stderr %q; want refusal peer-uid", r.code, r.stdout, r.stderr)
	}
	// The owner is still served by the same controller.
	if out := mustRun(t, bin, "hello", "--socket", sock, id); !strings.Contains(out, `"record":"welcome"`) {
		t.Fatalf("owner after the refusal: %q", out)
	}
	if !journalHas(t, "MOSAIC_REFUSAL", "peer-uid", "MOSAIC_CONVERSATION="+id, "MOSAIC_EVENT=refusal") {
		t.Fatal("the peer-uid refusal is not in the journal")
	}
}

func assertMode(t *testing.T, path string, want os.FileMode) {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if got := fi.Mode() & (os.ModeType | os.ModePerm); got != want {
		t.Fatalf("%s has mode %v, want %v", path, got, want)
	}
}

func unitProp(t *testing.T, unit, prop string) string {
	t.Helper()
	return strings.TrimSpace(mustRun(t, "systemctl", "--user", "show", "--value", "-p", prop, unit))
}

// journal returns the entries matching the journalctl arguments, read as
// the test user would: `journalctl --user ... -o json`. journald receives
// entries asynchronously, so it polls briefly for a non-empty answer.
func journal(t *testing.T, args ...string) []map[string]any {
	t.Helper()
	out := journalUntil(t, func(out []map[string]any) bool { return len(out) > 0 }, args...)
	if len(out) == 0 {
		t.Fatalf("no journal entry for %v within the bound", args)
	}
	return out
}

// journalHas says whether an entry matching args, with field set to
// value, reaches the user journal within the bound.
func journalHas(t *testing.T, field, value string, args ...string) bool {
	t.Helper()
	return hasEntry(journalUntil(t, func(es []map[string]any) bool { return hasEntry(es, field, value) }, args...), field, value)
}

// journalUntil reads the user journal's entries matching args until done
// says they are all there (journald may not have stored the last ones
// yet), or the bound passes: then it returns what it read last.
func journalUntil(t *testing.T, done func([]map[string]any) bool, args ...string) []map[string]any {
	t.Helper()
	var out []map[string]any
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		out = nil
		r := run(t, "journalctl", append([]string{"--user", "-o", "json", "--no-pager"}, args...)...)
		for _, line := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
			var m map[string]any
			if json.Unmarshal([]byte(line), &m) == nil {
				out = append(out, m)
			}
		}
		if done(out) || time.Now().After(deadline) {
			return out
		}
	}
}

func hasEntry(entries []map[string]any, field, value string) bool {
	for _, e := range entries {
		if e[field] == value {
			return true
		}
	}
	return false
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within the bound")
		}
		time.Sleep(50 * time.Millisecond)
	}
}
