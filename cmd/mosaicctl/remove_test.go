package main

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/mosaic-agents/mosaic/contrib/sandboxtest"
	"github.com/mosaic-agents/mosaic/conversations"
	"github.com/mosaic-agents/mosaic/protocol"
	"github.com/mosaic-agents/mosaic/scopes"
)

// TestRemovalRefusalsHaveCodes: `uninstall` while a conversation socket
// is active and `conv rm` of a conversation whose socket is active are
// refusals like every other, `socket-active` (exit 2) with the stop that
// works as typed, not an exit-1 error a script cannot tell from a broken
// bus; a relative --unit-dir is a bad command line (`usage`). Each
// refusal leaves the units and the conversation in place.
func TestRemovalRefusalsHaveCodes(t *testing.T) {
	sandboxtest.Require(t)
	bin := sandboxtest.Bin(t, "mosaicctl")
	t.Setenv("PATH", "/usr/bin:/bin") // no pi: no engine, only the socket
	id, _, _ := startConversation(t, bin, "removal")
	sock, svc := "mosaic-conv@"+id+".socket", "mosaic-conv@"+id+".service"
	for _, tc := range []struct {
		name string
		args []string
		code string
		fix  string
	}{
		{"uninstall", []string{"uninstall"}, protocol.CodeSocketActive, "`systemctl --user stop " + sock + "`"},
		{"conv rm", []string{"conv", "rm", id}, protocol.CodeSocketActive, "`systemctl --user stop " + sock + " " + svc + "`"},
		{"install --unit-dir relative", []string{"install", "--unit-dir", "units"}, protocol.CodeUsage, "/units"},
		{"uninstall --unit-dir relative", []string{"uninstall", "--unit-dir", "units"}, protocol.CodeUsage, "/units"},
		// Only root can ask every user's manager; a user is not told
		// that nothing runs after asking only itself.
		{"uninstall --global as a user", []string{"uninstall", "--global"}, protocol.CodeUsage, "sudo"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := run(t, bin, tc.args...)
			wantRefusal(t, r, tc.code)
			if !strings.Contains(r.stderr, tc.fix) {
				t.Fatalf("stderr %q; want it to name the fix %s", r.stderr, tc.fix)
			}
		})
	}
	t.Run("every user's manager", func(t *testing.T) {
		// What uninstall --global asks each user's manager, asked here of
		// the test user's own private socket (it admits its own uid).
		ctx := t.Context()
		u, err := askManager(ctx, filepath.Join(os.Getenv("XDG_RUNTIME_DIR"), "systemd", "private"))
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Contains(u.sockets, sock) || !strings.HasPrefix(u.who, "uid ") {
			t.Fatalf("askManager: %+v; want %s among the sockets of a named uid", u, sock)
		}
		var ref *protocol.Refusal
		if err := refuseBusy([]inUse{u}); !errors.As(err, &ref) || ref.Code != protocol.CodeSocketActive || !strings.Contains(ref.Message, u.who) {
			t.Fatalf("refuseBusy: %v; want socket-active naming %s", err, u.who)
		}
		if u, err := askManager(ctx, filepath.Join(t.TempDir(), "systemd", "private")); err != nil || len(u.sockets) > 0 {
			t.Fatalf("askManager of a manager that has ended: %+v, %v; want nothing and no error", u, err)
		}
	})
	if r := run(t, bin, "conv", "show", id); r.code != 0 {
		t.Fatalf("conv show after the refusals: exit %d, stderr %q; want the conversation kept", r.code, r.stderr)
	}
	if out := mustRun(t, "systemctl", "--user", "is-active", sock); strings.TrimSpace(out) != "active" {
		t.Fatalf("%s is %q after the refusals; want it left active", sock, out)
	}
	mustRun(t, "systemctl", "--user", "stop", sock, svc)
	mustRun(t, bin, "conv", "rm", id)
}

// TestConvRmRemovesAFileThatDoesNotLoad: a conversation file broken by
// hand (bad TOML) is refused `configuration` by every command, each
// naming `conv rm ID` as a fix, so `conv rm` removes it: by id, after the
// same checks, so it still refuses `engine-alive` while an engine scope
// of that id lives, and keeps the file until then.
func TestConvRmRemovesAFileThatDoesNotLoad(t *testing.T) {
	sandboxtest.Require(t)
	bin := sandboxtest.Bin(t, "mosaicctl")
	t.Setenv("PATH", "/usr/bin:/bin") // no pi
	mustRun(t, bin, "install")
	t.Cleanup(func() { run(t, bin, "uninstall", "--force") })
	proj, session := project(t, "broken")
	id := strings.TrimSpace(mustRun(t, bin, "conv", "add", "--project", proj, "--seat", "broken", "--session", session))
	t.Cleanup(func() { endConversation(t, bin, id) })
	dir, err := conversations.DefaultDir()
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, id+".toml")
	f, err := os.OpenFile(file, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString("garbage = [\n")
	f.Close()

	r := run(t, bin, "conv", "show", id)
	wantRefusal(t, r, protocol.CodeConfiguration)
	if !strings.Contains(r.stderr, "`mosaicctl conv rm "+id+"`") {
		t.Errorf("conv show of a broken file: %q; want it to name `mosaicctl conv rm %s`", r.stderr, id)
	}

	// An engine scope of the id (a stand-in: only its name counts).
	scope, err := scopes.UnitName(id, "x1")
	if err != nil {
		t.Fatal(err)
	}
	sleeper := exec.Command("systemd-run", "--user", "--scope", "--unit", scope, "sleep", "600")
	if err := sleeper.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { run(t, "systemctl", "--user", "stop", scope); sleeper.Wait() })
	waitFor(t, func() bool { return unitProp(t, scope, "ActiveState") == "active" })
	wantRefusal(t, run(t, bin, "conv", "rm", id), protocol.CodeEngineAlive)
	if _, err := os.Stat(file); err != nil {
		t.Fatalf("the refused conv rm: %v; want the file kept", err)
	}
	mustRun(t, "systemctl", "--user", "stop", scope)

	r = run(t, bin, "conv", "rm", id)
	if r.code != 0 || !strings.Contains(r.stdout, "removed "+id) {
		t.Fatalf("conv rm of a file that does not load: exit %d, stdout %q, stderr %q; want it removed", r.code, r.stdout, r.stderr)
	}
	if _, err := os.Stat(file); !os.IsNotExist(err) {
		t.Fatalf("%s after conv rm: %v; want it gone", file, err)
	}
	if r := run(t, bin, "conv", "list"); r.code != 0 || strings.Contains(r.stdout+r.stderr, id) {
		t.Fatalf("conv list after conv rm: exit %d, %q %q; want no trace of %s", r.code, r.stdout, r.stderr, id)
	}
	wantRefusal(t, run(t, bin, "conv", "rm", id), protocol.CodeUnknownConv)
}
