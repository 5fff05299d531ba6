package main

import (
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mosaic-agents/mosaic/contrib/sandboxtest"
	"github.com/mosaic-agents/mosaic/contrib/stubmodel"
	"github.com/mosaic-agents/mosaic/internal/xdg"
	"github.com/mosaic-agents/mosaic/protocol"
	"github.com/mosaic-agents/mosaic/units"
)

// TestJudgeHomes: doctor's xdg-homes check compares this process's
// XDG_CONFIG_HOME and XDG_STATE_HOME with the user manager's as each
// resolves them (unset or relative: the default under HOME), and fails
// naming both values and the fix that fits where the value is set.
func TestJudgeHomes(t *testing.T) {
	link := filepath.Join(t.TempDir(), "cfg")
	real := t.TempDir()
	if err := os.Symlink(real, link); err != nil {
		t.Fatal(err)
	}
	env := func(kv ...string) func(string) string { return units.Getenv(append([]string{"HOME=/home/u"}, kv...)) }
	for _, tc := range []struct {
		name          string
		here, manager func(string) string
		verdict       string
		says          []string // in the detail
		fix           []string
	}{
		{"both default", env(), env(), verdictOK,
			[]string{"XDG_CONFIG_HOME=/home/u/.config, XDG_STATE_HOME=/home/u/.local/state"}, nil},
		{"the same value in both", env("XDG_CONFIG_HOME=/c"), env("XDG_CONFIG_HOME=/c/"), verdictOK, []string{"XDG_CONFIG_HOME=/c"}, nil},
		{"a relative value is the default", env("XDG_STATE_HOME=s"), env(), verdictOK, []string{"XDG_STATE_HOME=/home/u/.local/state"}, nil},
		{"one directory through a link", env("XDG_CONFIG_HOME=" + link), env("XDG_CONFIG_HOME=" + real), verdictOK, []string{link}, nil},
		{"config in the shell only", env("XDG_CONFIG_HOME=/home/u/xdg-config"), env(), verdictFail,
			[]string{"XDG_CONFIG_HOME is /home/u/xdg-config here (set) but /home/u/.config for the user manager", "(unset: the default)"},
			[]string{"unset XDG_CONFIG_HOME", "`ManagerEnvironment=XDG_CONFIG_HOME=/home/u/xdg-config`", "environment.d", "--unit-dir ~/.config/systemd/user"}},
		{"state in the manager only", env(), env("XDG_STATE_HOME=/s"), verdictFail,
			[]string{"XDG_STATE_HOME is /home/u/.local/state here (unset: the default) but /s for the user manager"},
			[]string{"`export XDG_STATE_HOME=/s`"}},
		{"both differ", env("XDG_CONFIG_HOME=/c", "XDG_STATE_HOME=/s"), env(), verdictFail,
			[]string{"XDG_CONFIG_HOME is /c here", "XDG_STATE_HOME is /s here"},
			[]string{"unset XDG_CONFIG_HOME", "unset XDG_STATE_HOME"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			found, err := judgeHomes(tc.here, tc.manager)
			r := judge(check{Name: "xdg-homes", Fix: "default"}, found, err)
			if r.Verdict != tc.verdict {
				t.Fatalf("%+v; want %s", r, tc.verdict)
			}
			for _, s := range tc.says {
				if !strings.Contains(r.Detail, s) {
					t.Errorf("detail %q does not say %q", r.Detail, s)
				}
			}
			for _, s := range tc.fix {
				if !strings.Contains(r.Fix, s) {
					t.Errorf("fix %q does not say %q", r.Fix, s)
				}
			}
		})
	}
}

// TestUnseen: install's refusal when the user manager does not load the
// units from where install wrote them names the directory, the manager's
// search path and the fix, under the code configuration.
func TestUnseen(t *testing.T) {
	path := []string{"/home/u/.config/systemd/user", "/etc/systemd/user"}
	for _, tc := range []struct {
		name   string
		dir    string
		loaded units.Loaded
		says   []string
	}{
		{"not in the search path", "/home/u/xdg-config/systemd/user", units.Loaded{LoadState: "not-found"},
			[]string{"does not read unit files there", "/home/u/.config/systemd/user /etc/systemd/user", "`mosaicctl doctor`",
				"uninstall --unit-dir /home/u/xdg-config/systemd/user"}},
		{"shadowed", "/etc/systemd/user", units.Loaded{LoadState: "loaded", FragmentPath: "/home/u/.config/systemd/user/mosaic-web.socket"},
			[]string{"loads mosaic-web.socket from /home/u/.config/systemd/user/mosaic-web.socket, which comes first"}},
		{"not loaded", "/home/u/.config/systemd/user", units.Loaded{LoadState: "not-found"},
			[]string{"did not load mosaic-web.socket from there (load state not-found)", "daemon-reload"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := unseen(tc.dir, tc.loaded, path)
			var r *protocol.Refusal
			if !errors.As(err, &r) || r.Code != protocol.CodeConfiguration {
				t.Fatalf("%v; want a %s refusal", err, protocol.CodeConfiguration)
			}
			for _, s := range append(tc.says, tc.dir) {
				if !strings.Contains(r.Message, s) {
					t.Errorf("%q does not say %q", r.Message, s)
				}
			}
		})
	}
}

// runWithEnv runs name with args and the extra environment.
func runWithEnv(t *testing.T, extra []string, name string, args ...string) result {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Env = append(os.Environ(), extra...)
	return runCmd(t, cmd)
}

// doctorJSON runs `mosaicctl doctor --json` with the extra environment
// and returns its exit status and each check's result by name.
func doctorJSON(t *testing.T, extra []string, bin string) (int, map[string]checkResult) {
	t.Helper()
	r := runWithEnv(t, extra, bin, "doctor", "--json")
	var out struct{ Checks []checkResult }
	if err := json.Unmarshal([]byte(r.stdout), &out); err != nil {
		t.Fatalf("doctor --json: exit %d: %v\n%s%s", r.code, err, r.stdout, r.stderr)
	}
	byName := map[string]checkResult{}
	for _, c := range out.Checks {
		byName[c.Name] = c
	}
	t.Logf("doctor --json: exit %d\n%s", r.code, r.stdout)
	return r.code, byName
}

// TestXDGHomesInShellOnly: a user exports XDG_CONFIG_HOME (or
// XDG_STATE_HOME) in their shell's rc file, not in the user manager's
// environment. install refuses units the manager does not read, naming
// the fix; doctor fails naming both values; once the manager has the same
// value (what environment.d gives it; here set-environment) and the units
// are where the manager reads them, the first prompt gets its answer.
func TestXDGHomesInShellOnly(t *testing.T) {
	sandboxtest.Require(t)
	bin := sandboxtest.Bin(t, "mosaicctl")
	home, err := os.UserHomeDir()
	if err != nil {
		t.Fatal(err)
	}
	managerUnits := filepath.Join(home, ".config", "systemd", "user")
	for _, tc := range []struct {
		name string
		base xdg.Base
		// refused: install's default directory follows the variable, and
		// the manager does not read it.
		refused bool
	}{
		{"config", xdg.Config, true},
		{"state", xdg.State, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			name := tc.base.Env
			if mgr := mustRun(t, "systemctl", "--user", "show-environment"); strings.Contains(mgr, name) {
				t.Fatalf("the user manager has %s already: %s", name, mgr)
			}
			dir := filepath.Join(home, "xdg-"+tc.name)
			if err := os.MkdirAll(dir, 0o700); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { os.RemoveAll(dir) })
			env := []string{name + "=" + dir}

			r := runWithEnv(t, env, bin, "install")
			t.Cleanup(func() { runWithEnv(t, env, bin, "uninstall", "--force") })
			written := filepath.Join(dir, "systemd", "user")
			if tc.refused {
				if r.code != 2 || !strings.Contains(r.stderr, "configuration: install wrote the units to "+written+
					", but the user manager does not read unit files there") || !strings.Contains(r.stderr, managerUnits) ||
					!strings.Contains(r.stderr, "`mosaicctl doctor`") {
					t.Fatalf("install with %s in the shell only: exit %d\n%s%s\nwant a configuration refusal naming %s, %s and doctor",
						name, r.code, r.stdout, r.stderr, written, managerUnits)
				}
			} else if r.code != 0 {
				t.Fatalf("install: exit %d\n%s%s", r.code, r.stdout, r.stderr)
			}

			// conv add registers the conversation, and warns that the
			// controllers will not see it as this shell does.
			proj, session := project(t, "xdg-before-"+tc.name)
			r = runWithEnv(t, env, bin, "conv", "add", "--project", proj, "--seat", "xdg-before-"+tc.name, "--session", session)
			if r.code != 0 {
				t.Fatalf("conv add: exit %d %q %q", r.code, r.stdout, r.stderr)
			}
			if want := "mosaicctl: warning: " + name + " is " + dir + " here (set) but " + filepath.Join(home, tc.base.Fallback) +
				" for the user manager"; !strings.Contains(r.stderr, want) || !strings.Contains(r.stderr, "Fix: unset "+name) {
				t.Errorf("conv add with %s in the shell only: stderr %q, want the warning %q and its fix", name, r.stderr, want)
			}
			if tc.refused {
				// The units are not loaded: a verb's start of the socket says
				// so and points at doctor, not at install again.
				p := runWithEnv(t, env, bin, "prompt", "--take", strings.TrimSpace(r.stdout), "hello")
				if p.code == 0 || !strings.Contains(p.stderr, "the user manager does not see mosaic's units: `mosaicctl doctor` says why") {
					t.Errorf("prompt with the units unseen: exit %d %q; want the hint to name doctor", p.code, p.stderr)
				}
			}
			code, rs := doctorJSON(t, env, bin)
			want(t, rs, "xdg-homes", verdictFail, name+" is "+dir+" here (set) but "+filepath.Join(home, tc.base.Fallback)+
				" for the user manager", "unset "+name)
			if code != 1 {
				t.Errorf("doctor with %s in the shell only: exit %d, want 1", name, code)
			}

			// The fix: the manager gets the same value, the units go where it
			// reads them.
			mustRun(t, "systemctl", "--user", "set-environment", name+"="+dir)
			t.Cleanup(func() { run(t, "systemctl", "--user", "unset-environment", name) })
			if r := runWithEnv(t, env, bin, "install", "--unit-dir", managerUnits); r.code != 0 {
				t.Fatalf("install --unit-dir %s: exit %d\n%s%s", managerUnits, r.code, r.stdout, r.stderr)
			}
			t.Cleanup(func() { runWithEnv(t, env, bin, "uninstall", "--force", "--unit-dir", managerUnits) })
			_, rs = doctorJSON(t, env, bin)
			want(t, rs, "xdg-homes", verdictOK, name+"="+dir, "")
			want(t, rs, "units", verdictOK, filepath.Join(managerUnits, "mosaic-conv@.service"), "")

			pi, model, _ := sandboxtest.StubPi(t, stubmodel.Script{Turns: []stubmodel.Turn{{Text: []string{"answer-4711"}}}})
			proj, session = project(t, "xdg-"+tc.name)
			r = runWithEnv(t, env, bin, "conv", "add", "--project", proj, "--seat", "xdg-"+tc.name, "--session", session,
				"--engine", pi, "--provider", model.Provider, "--model", model.Model, "--agent-dir", model.AgentDir)
			if r.code != 0 {
				t.Fatalf("conv add: exit %d %q %q", r.code, r.stdout, r.stderr)
			}
			if strings.Contains(r.stderr, "warning: XDG_") {
				t.Errorf("conv add with %s agreeing still warns: %q", name, r.stderr)
			}
			id := strings.TrimSpace(r.stdout)
			t.Cleanup(func() {
				// The proven stop needs this conversation's directories;
				// endConversation then ends whatever it left.
				runWithEnv(t, env, bin, "stop", "--take", "--yes", "--timeout", "1m", id)
				endConversation(t, bin, id)
			})
			p := runWithEnv(t, env, bin, "prompt", "--take", "--timeout", "2m", id, "hello")
			if p.code != 0 || !strings.Contains(p.stdout, "answer-4711") {
				t.Errorf("with %s agreeing, the first prompt did not get its answer: exit %d %q %q", name, p.code, p.stdout, p.stderr)
			}
		})
	}
}
