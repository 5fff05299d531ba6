package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/mosaic-agents/mosaic/contrib/sandboxtest"
	"github.com/mosaic-agents/mosaic/contrib/stubmodel"
	"github.com/mosaic-agents/mosaic/conversations"
	"github.com/mosaic-agents/mosaic/engine/pi"
	"github.com/mosaic-agents/mosaic/units"
)

func TestRunChecksOneLinePerCheck(t *testing.T) {
	cs := []check{
		{Name: "passes", Run: func(context.Context) (string, error) { return "all good", nil }, Fix: "none"},
		{Name: "fails", Run: func(context.Context) (string, error) { return "", errors.New("it broke") }, Fix: "mend it"},
		{Name: "warns", Run: func(context.Context) (string, error) { return "", warnf("", "odd") }, Fix: "look"},
		{Name: "own-fix", Run: func(context.Context) (string, error) { return "", failf("this way", "bad") }, Fix: "not this"},
	}
	rs := runChecks(context.Background(), cs)
	var out bytes.Buffer
	printResults(&out, rs)
	want := "ok    passes               all good\n" +
		"FAIL  fails                it broke; fix: mend it\n" +
		"warn  warns                odd; fix: look\n" +
		"FAIL  own-fix              bad; fix: this way\n"
	if out.String() != want {
		t.Fatalf("output\n%q\nwant\n%q", out.String(), want)
	}
	out.Reset()
	if err := printResultsJSON(&out, rs); err != nil {
		t.Fatal(err)
	}
	var got struct {
		Checks   []checkResult
		Failed   int
		Warnings int
	}
	if err := json.Unmarshal(out.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	if got.Failed != 2 || got.Warnings != 1 || len(got.Checks) != 4 || got.Checks[3] != (checkResult{Name: "own-fix", Verdict: "fail", Detail: "bad", Fix: "this way"}) {
		t.Fatalf("json: %s", out.String())
	}
}

func TestJudgeJournal(t *testing.T) {
	dir := t.TempDir()
	readable := filepath.Join(dir, "user-1000.journal")
	if err := os.WriteFile(readable, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	absent := filepath.Join(dir, "user-1001.journal")
	for _, tc := range []struct {
		name    string
		conf    map[string]string
		statErr error
		file    string
		verdict string
		says    string
	}{
		{"persistent", map[string]string{"Storage": "persistent"}, nil, readable, verdictOK, "persistent (Storage=persistent, SplitMode=uid)"},
		{"auto on disk", nil, nil, readable, verdictOK, "Storage=auto"},
		{"auto in memory", nil, fs.ErrNotExist, readable, verdictWarn, "volatile (Storage=auto, /var/log/journal absent)"},
		{"volatile", map[string]string{"Storage": "volatile"}, nil, readable, verdictWarn, "lost at reboot"},
		{"none", map[string]string{"Storage": "none"}, nil, readable, verdictFail, "discards every entry"},
		{"not split", map[string]string{"SplitMode": "none"}, nil, readable, verdictWarn, "SplitMode=none"},
		{"no user file yet", nil, nil, absent, verdictWarn, "no user journal file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			found, err := judgeJournal(tc.conf, tc.statErr, tc.file)
			r := judge(check{Name: "journal", Fix: "default"}, found, err)
			if r.Verdict != tc.verdict || !strings.Contains(r.Detail, tc.says) {
				t.Fatalf("%+v; want %s saying %q", r, tc.verdict, tc.says)
			}
		})
	}
}

func TestParseJournalSection(t *testing.T) {
	merged := "# /etc/systemd/journald.conf\n[Journal]\n#Storage=auto\nStorage=volatile\n[Other]\nStorage=none\n" +
		"# /run/systemd/journald.conf.d/x.conf\n[Journal]\nStorage = persistent\n"
	if got := parseJournalSection([]byte(merged)); got["Storage"] != "persistent" || len(got) != 1 {
		t.Fatalf("%v; want the last [Journal] value", got)
	}
}

func TestLingering(t *testing.T) {
	u, err := user.Current()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if on, _, err := lingering(context.Background(), dir, u); err != nil || on {
		t.Fatalf("no linger file: on=%v err=%v", on, err)
	}
	if err := os.WriteFile(filepath.Join(dir, u.Username), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if on, how, err := lingering(context.Background(), dir, u); err != nil || !on || !strings.Contains(how, dir) {
		t.Fatalf("linger file: on=%v how=%q err=%v", on, how, err)
	}
}

func TestUnitBinary(t *testing.T) {
	for _, bin := range []string{"/usr/bin/mosaicctl", "/opt/my tools/mosaicctl", "/opt/50%/mosaicctl"} {
		files, err := units.Render(bin)
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range files {
			if f.Name != "mosaic-conv@.service" {
				continue
			}
			if got, err := unitBinary(f.Data); err != nil || got != bin {
				t.Errorf("unitBinary of the unit rendered for %q: %q, %v", bin, got, err)
			}
		}
	}
	if _, err := unitBinary([]byte("[Service]\nExecStart=mosaicctl serve\n")); err == nil {
		t.Error("a relative ExecStart= binary was accepted")
	}
}

func TestRepinCommand(t *testing.T) {
	cv := &conversations.Conversation{ID: "pi-0123456789abcdef0123", Project: "/home/u/my project", Seat: "s1", Workspace: "w",
		Session: "/home/u/s.jsonl", Engine: conversations.Engine{Path: "/opt/pi/bin/pi", Provider: "p", Model: "m",
			Extensions: []conversations.Extension{{Path: "/home/u/ext/a.ts"}, {Path: "/home/u/ext/b.ts"}}}}
	got := repinCommand(cv)
	// Every extension is named again: `conv add --replace` keeps only the
	// flags given, so a fix without them would drop the extensions.
	want := "`mosaicctl conv add --project '/home/u/my project' --seat s1 --session /home/u/s.jsonl --workspace w --engine /opt/pi/bin/pi --provider p --model m --extension /home/u/ext/a.ts --extension /home/u/ext/b.ts --replace`"
	if got != want {
		t.Fatalf("%s\nwant %s", got, want)
	}
}

// TestDoctorConfinement: on the sandbox confinement is available and
// doctor says so; where a user namespace cannot be made (an ancestor's
// user.max_user_namespaces is used up) it fails with the fix and exit 1.
func TestDoctorConfinement(t *testing.T) {
	sandboxtest.Require(t)
	bin := sandboxtest.Bin(t, "mosaicctl")
	r := run(t, bin, "doctor")
	if !strings.Contains(r.stdout, "ok    engine-confinement") || !strings.Contains(r.stdout, "cgroup") {
		t.Fatalf("doctor: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	// Root of a user namespace of its own limits it to one namespace below
	// and uses it up running doctor as an ordinary uid there: the probe's
	// clone(CLONE_NEWUSER) fails with ENOSPC.
	r = run(t, "unshare", "--user", "--map-root-user", "sh", "-c",
		`echo 1 > /proc/sys/user/max_user_namespaces && exec unshare --user --map-user=1000 --map-group=1000 "$0" doctor`, bin)
	if r.code != 1 || !strings.Contains(r.stdout, "FAIL  engine-confinement") || !strings.Contains(r.stdout, "fix: allow unprivileged user namespaces") {
		t.Fatalf("doctor without user namespaces: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}

// doctorEnv runs mosaicctl with its own XDG_CONFIG_HOME, so that the
// conversations doctor looks at are this test's alone (other tests in the
// same sandbox leave conversations behind). The user manager gets the
// same value, as a user gives it in environment.d, or doctor's xdg-homes
// check rightly fails; that value does not move where the manager reads
// unit files, so the units go to its own directory (units).
type doctorEnv struct {
	t      *testing.T
	bin    string
	config string
	units  string
}

func newDoctorEnv(t *testing.T) *doctorEnv {
	d := &doctorEnv{t: t, bin: sandboxtest.Bin(t, "mosaicctl"), config: t.TempDir()}
	home, err := os.UserHomeDir()
	if err != nil {
		t.Fatal(err)
	}
	d.units = filepath.Join(home, ".config", "systemd", "user")
	mustRun(t, "systemctl", "--user", "set-environment", "XDG_CONFIG_HOME="+d.config)
	t.Cleanup(func() { run(t, "systemctl", "--user", "unset-environment", "XDG_CONFIG_HOME") })
	return d
}

func (d *doctorEnv) run(env []string, args ...string) result {
	d.t.Helper()
	cmd := exec.Command(d.bin, args...)
	cmd.Env = os.Environ()
	if d.config != "" {
		cmd.Env = append(cmd.Env, "XDG_CONFIG_HOME="+d.config)
	}
	cmd.Env = append(cmd.Env, env...)
	return runCmd(d.t, cmd)
}

func (d *doctorEnv) mustRun(args ...string) string {
	d.t.Helper()
	r := d.run(nil, args...)
	if r.code != 0 {
		d.t.Fatalf("mosaicctl %v: exit %d\n%s%s", args, r.code, r.stdout, r.stderr)
	}
	return r.stdout
}

// doctor runs `mosaicctl doctor --json` and returns its exit status and
// each check's result by name.
func (d *doctorEnv) doctor(env ...string) (int, map[string]checkResult) {
	d.t.Helper()
	r := d.run(env, "doctor", "--json")
	var out struct{ Checks []checkResult }
	if err := json.Unmarshal([]byte(r.stdout), &out); err != nil {
		d.t.Fatalf("doctor --json: exit %d: %v\n%s%s", r.code, err, r.stdout, r.stderr)
	}
	byName := map[string]checkResult{}
	for _, c := range out.Checks {
		byName[c.Name] = c
	}
	if len(byName) != len(checks) {
		d.t.Fatalf("doctor --json printed %d checks, want %d:\n%s", len(byName), len(checks), r.stdout)
	}
	d.t.Logf("doctor --json: exit %d\n%s", r.code, r.stdout)
	return r.code, byName
}

// addConversation registers a conversation on seat with the further
// `conv add` flags and returns its id.
func (d *doctorEnv) addConversation(seat string, flags ...string) string {
	d.t.Helper()
	proj, session := project(d.t, seat)
	return strings.TrimSpace(d.mustRun(append([]string{"conv", "add", "--project", proj, "--seat", seat, "--session", session}, flags...)...))
}

// want fails the test unless check name has the verdict and its detail
// (and, when not ok, its fix) say what is expected.
func want(t *testing.T, rs map[string]checkResult, name, verdict, detail, fix string) {
	t.Helper()
	r := rs[name]
	if r.Verdict != verdict || !strings.Contains(r.Detail, detail) || !strings.Contains(r.Fix, fix) {
		t.Errorf("%s: %+v; want %s, detail with %q, fix with %q", name, r, verdict, detail, fix)
	}
}

// TestDoctorInSandbox: in the sandbox every check passes except the two
// this host cannot give (lingering is off for the test user: the sandbox
// starts its manager directly; this hybrid host's cgroup2 has no
// controllers, so limits are accepted but not enforced), which warn with
// exit 0; then each check that can be broken from a user's seat is broken
// and fails with its fix, and the fix mends it.
func TestDoctorInSandbox(t *testing.T) {
	sandboxtest.Require(t)
	d := newDoctorEnv(t)
	entry, _ := fakeEngine(t, stubmodel.Script{})

	code, rs := d.doctor()
	want(t, rs, "units", verdictFail, "the mosaic-conv@ units are not installed", "`mosaicctl install`")
	want(t, rs, "engine-pins", verdictOK, "no conversations registered", "")
	if code != 1 {
		t.Fatalf("doctor: exit %d without units", code)
	}

	d.mustRun("install", "--unit-dir", d.units)
	t.Cleanup(func() { d.run(nil, "uninstall", "--force", "--unit-dir", d.units) })
	id := d.addConversation("doctor", "--engine", entry, "--provider", "fakellm", "--model", "fake-model")
	code, rs = d.doctor()
	want(t, rs, "user-manager", verdictOK, "user manager, running", "")
	want(t, rs, "journal", verdictOK, "persistent (Storage=persistent, SplitMode=uid)", "")
	want(t, rs, "engine-confinement", verdictOK, "namespaces", "")
	want(t, rs, "engine-pins", verdictOK, "1 conversation; engine and interpreter pins match", "")
	want(t, rs, "xdg-homes", verdictOK, "XDG_CONFIG_HOME="+d.config, "")
	want(t, rs, "units", verdictOK, filepath.Join(d.units, "mosaic-conv@.service")+" and ", "")
	want(t, rs, "units", verdictOK, "mosaic-web.service current (run "+d.bin+")", "")
	want(t, rs, "linger", verdictWarn, "lingering is off for mosaic-test", "loginctl enable-linger")
	enforced := limitsEnforced(t)
	if enforced {
		want(t, rs, "cgroup", verdictOK, "are enforced", "")
	} else {
		want(t, rs, "cgroup", verdictWarn, "accepted but NOT enforced on this host (no registered conversation sets one)", "")
	}
	// The sandbox shares this machine's kernel: Yama or not is the host's.
	switch scope := hostPtraceScope(t); scope {
	case "":
		want(t, rs, "yama", verdictWarn, "no Yama in this kernel", "CONFIG_SECURITY_YAMA=y")
	case "0":
		want(t, rs, "yama", verdictWarn, "kernel.yama.ptrace_scope=0", "/etc/sysctl.d/")
	default:
		want(t, rs, "yama", verdictOK, "kernel.yama.ptrace_scope="+scope, "")
	}
	if code != 0 {
		t.Fatalf("doctor: exit %d with only warnings", code)
	}

	t.Run("real Pi", func(t *testing.T) {
		piBin := os.Getenv("MOSAIC_PI")
		if piBin == "" {
			sandboxtest.Unavailable(t, "MOSAIC_PI is not set: `make test` installs the pinned Pi")
		}
		real := d.addConversation("doctor-pi", "--engine", piBin)
		code, rs := d.doctor()
		want(t, rs, "engine-pins", verdictOK, "2 conversations; engine and interpreter pins match", "")
		if !strings.Contains(rs["engine-pins"].Detail, "Pi "+pi.PinnedVersion+" on Node ") || code != 0 {
			t.Errorf("exit %d; the pins check does not name Pi and its Node: %q", code, rs["engine-pins"].Detail)
		}
		d.mustRun("conv", "rm", real)
	})

	t.Run("changed pin", func(t *testing.T) {
		f, err := os.OpenFile(entry, os.O_APPEND|os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		f.WriteString("# changed\n")
		f.Close()
		code, rs := d.doctor()
		want(t, rs, "engine-pins", verdictFail, id+": engine-pin-mismatch: engine entry "+entry+" has sha256", "mosaicctl conv add --project")
		if code != 1 {
			t.Fatalf("exit %d with a failing check", code)
		}
		// The fix is a command: run it, and the pin matches again.
		m := regexp.MustCompile("`mosaicctl (conv add [^`]*)`").FindStringSubmatch(rs["engine-pins"].Fix)
		if m == nil {
			t.Fatalf("no command in %q", rs["engine-pins"].Fix)
		}
		cmd := exec.Command("sh", "-c", `exec "$MOSAICCTL" `+m[1])
		cmd.Env = append(os.Environ(), "XDG_CONFIG_HOME="+d.config, "MOSAICCTL="+d.bin)
		if r := runCmd(t, cmd); r.code != 0 {
			t.Fatalf("the fix %q: exit %d\n%s%s", m[1], r.code, r.stdout, r.stderr)
		}
		_, rs = d.doctor()
		want(t, rs, "engine-pins", verdictOK, "pins match", "")
	})

	t.Run("changed interpreter", func(t *testing.T) {
		entry, _ := fakeEngine(t, stubmodel.Script{})
		sh := filepath.Join(filepath.Dir(filepath.Dir(entry)), "sh")
		b, err := os.ReadFile("/bin/sh")
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(sh, b, 0o755); err != nil {
			t.Fatal(err)
		}
		script, err := os.ReadFile(entry)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(entry, bytes.Replace(script, []byte("#!/bin/sh"), []byte("#!"+sh), 1), 0o755); err != nil {
			t.Fatal(err)
		}
		interp := d.addConversation("doctor-interp", "--engine", entry)
		_, rs := d.doctor()
		want(t, rs, "engine-pins", verdictOK, "2 conversations; engine and interpreter pins match", "")
		if !strings.Contains(rs["engine-pins"].Detail, "run by "+sh) {
			t.Errorf("the pins check does not name the interpreter %s: %q", sh, rs["engine-pins"].Detail)
		}
		f, err := os.OpenFile(sh, os.O_APPEND|os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		f.WriteString("changed")
		f.Close()
		code, rs := d.doctor()
		want(t, rs, "engine-pins", verdictFail, "1 of 2 conversations cannot launch: "+interp+": engine-pin-mismatch: the pinned interpreter "+sh+" changed", "--seat doctor-interp")
		if code != 1 {
			t.Fatalf("exit %d with a failing check", code)
		}
		d.mustRun("conv", "rm", interp)
	})

	t.Run("limit not enforced", func(t *testing.T) {
		if enforced {
			t.Skip("this host enforces limits")
		}
		limited := d.addConversation("doctor-limited", "--engine", entry, "--memory-max", "1G")
		code, rs := d.doctor()
		want(t, rs, "cgroup", verdictFail, limited+" sets MemoryMax=1G (unbounded here)", "drop those limits")
		if code != 1 {
			t.Fatalf("exit %d with a failing check", code)
		}
		d.mustRun("conv", "rm", limited)
	})

	service := filepath.Join(d.units, "mosaic-conv@.service")
	t.Run("outdated unit", func(t *testing.T) {
		b, err := os.ReadFile(service)
		if err != nil {
			t.Fatal(err)
		}
		old := bytes.Replace(b, []byte("KillMode=mixed"), []byte("KillMode=control-group"), 1)
		if err := os.WriteFile(service, old, 0o644); err != nil {
			t.Fatal(err)
		}
		code, rs := d.doctor()
		want(t, rs, "units", verdictFail, service+` is outdated: line `, "`mosaicctl install`")
		if !strings.Contains(rs["units"].Detail, `is "KillMode=control-group", current is "KillMode=mixed"`) || code != 1 {
			t.Fatalf("exit %d, %q", code, rs["units"].Detail)
		}
		d.mustRun("install", "--unit-dir", d.units)
		_, rs = d.doctor()
		want(t, rs, "units", verdictOK, "current", "")
	})

	t.Run("foreign unit", func(t *testing.T) {
		b, err := os.ReadFile(service)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(service, bytes.Replace(b, []byte(units.Marker), []byte("# mine:"), 1), 0o644); err != nil {
			t.Fatal(err)
		}
		code, rs := d.doctor()
		want(t, rs, "units", verdictWarn, "was not written by mosaic", "move it away")
		if code != 0 {
			t.Fatalf("exit %d with a warning", code)
		}
		d.mustRun("install", "--force", "--unit-dir", d.units)
	})

	t.Run("no user manager", func(t *testing.T) {
		code, rs := d.doctor("DBUS_SESSION_BUS_ADDRESS=unix:path=/nonexistent/bus")
		want(t, rs, "user-manager", verdictFail, "no user manager on the user bus", "dbus-user-session")
		if code != 1 {
			t.Fatalf("exit %d with a failing check", code)
		}
	})
}

// TestDoctorUnitsLoaded: the user manager's own unit directory. A unit
// file changed since the manager loaded it (an upgrade or an install
// without a reload) warns until `systemctl --user daemon-reload`; drop-ins
// are named, not judged.
func TestDoctorUnitsLoaded(t *testing.T) {
	sandboxtest.Require(t)
	d := &doctorEnv{t: t, bin: sandboxtest.Bin(t, "mosaicctl")}
	entry, _ := fakeEngine(t, stubmodel.Script{})
	id, _, _ := startConversation(t, d.bin, "doctor-loaded", "--engine", entry, "--provider", "fakellm", "--model", "fake-model")
	dir, err := units.UserDir()
	if err != nil {
		t.Fatal(err)
	}
	socket := filepath.Join(dir, "mosaic-conv@.socket")
	later := time.Now().Add(time.Minute)
	if err := os.Chtimes(socket, later, later); err != nil {
		t.Fatal(err)
	}
	// Other checks may fail here (other tests' conversations share this
	// store); only the units line is this test's.
	_, rs := d.doctor()
	want(t, rs, "units", verdictWarn, "still runs the old text for mosaic-conv@"+id+".socket", "systemctl --user daemon-reload")
	mustRun(t, "systemctl", "--user", "daemon-reload")
	_, rs = d.doctor()
	want(t, rs, "units", verdictOK, "current (run "+d.bin+")", "")

	dropIn := filepath.Join(dir, "mosaic-conv@.service.d")
	if err := os.MkdirAll(dropIn, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dropIn) })
	_, rs = d.doctor()
	want(t, rs, "units", verdictOK, "amended by drop-ins in "+dropIn, "")
}

// limitsEnforced reads the user manager's cgroup.controllers itself.
func limitsEnforced(t *testing.T) bool {
	t.Helper()
	cg := strings.TrimPrefix(strings.TrimSpace(mustRun(t, "systemctl", "--user", "show", "-p", "ControlGroup", "--value")), "/")
	b, err := os.ReadFile(filepath.Join("/sys/fs/cgroup", cg, "cgroup.controllers"))
	if err != nil {
		t.Fatal(err)
	}
	have := strings.Fields(string(b))
	n := 0
	for _, c := range have {
		if c == "memory" || c == "pids" || c == "cpu" {
			n++
		}
	}
	t.Logf("the user manager's cgroup has controllers %q", have)
	return n == 3
}

// hostPtraceScope reads Yama's ptrace_scope itself: "" without Yama.
func hostPtraceScope(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("/proc/sys/kernel/yama/ptrace_scope")
	if errors.Is(err, fs.ErrNotExist) {
		t.Log("this kernel has no Yama")
		return ""
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("kernel.yama.ptrace_scope=%s", strings.TrimSpace(string(b)))
	return strings.TrimSpace(string(b))
}

// TestDoctorNamesReplaceableLinks: a configuration home, or Pi's agent
// directory, reached through a symbolic link the user owns is named by
// the confinement check's link scan; the state and data homes without
// one are not.
func TestDoctorNamesReplaceableLinks(t *testing.T) {
	home := t.TempDir()
	real := filepath.Join(home, "dotfiles", "config")
	if err := os.MkdirAll(real, 0o755); err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(home, ".config")
	if err := os.Symlink(real, cfg); err != nil {
		t.Fatal(err)
	}
	t.Setenv("HOME", home)
	t.Setenv("XDG_CONFIG_HOME", cfg)
	t.Setenv("XDG_STATE_HOME", filepath.Join(home, "state"))
	t.Setenv("XDG_DATA_HOME", filepath.Join(home, "data"))
	if got := replaceableLinks(); len(got) != 1 || got[0] != cfg {
		t.Fatalf("replaceableLinks() = %v, want [%s]", got, cfg)
	}
	t.Setenv("XDG_CONFIG_HOME", real)
	if got := replaceableLinks(); len(got) != 0 {
		t.Fatalf("replaceableLinks() = %v with no link on the way", got)
	}
	// Pi's agent directory, read-only in every engine, through a link.
	pi := filepath.Join(home, "dotfiles", "pi")
	if err := os.MkdirAll(filepath.Join(pi, "agent"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(pi, filepath.Join(home, ".pi")); err != nil {
		t.Fatal(err)
	}
	if got := replaceableLinks(); len(got) != 1 || got[0] != filepath.Join(home, ".pi") {
		t.Fatalf("replaceableLinks() = %v, want [%s]", got, filepath.Join(home, ".pi"))
	}
}

// TestJudgeEnvFiles: doctor names an env file a launch would refuse (a
// link on its path) and warns of one masked alone, whose mask a save by
// rename lifts.
func TestJudgeEnvFiles(t *testing.T) {
	home := t.TempDir()
	t.Setenv("XDG_CONFIG_HOME", filepath.Join(t.TempDir(), "config"))
	config, err := conversations.ConfigDir()
	if err != nil {
		t.Fatal(err)
	}
	agentIn := &conversations.Conversation{ID: "pi", Project: filepath.Join(home, "p"), Session: filepath.Join(home, "p", ".pi", "s.jsonl"),
		Engine: conversations.Engine{AgentDir: filepath.Join(config, "pi-agent")}}
	keys, notes := filepath.Join(home, "keys"), filepath.Join(home, "notes")
	for _, d := range []string{keys, notes} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	// write makes an env file holding a key, or body when one is given.
	write := func(p string, body ...string) string {
		text := "ANTHROPIC_API_KEY=k\n"
		if len(body) > 0 {
			text = body[0]
		}
		if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	good, beside := write(filepath.Join(keys, "a.env")), write(filepath.Join(notes, "b.env"))
	write(filepath.Join(notes, "todo.txt"))
	link := filepath.Join(home, "keys-link")
	if err := os.Symlink(keys, link); err != nil {
		t.Fatal(err)
	}
	cl := func(id, env string) *conversations.Conversation {
		return &conversations.Conversation{ID: id, Project: filepath.Join(home, "p"), EngineKind: "claude", Claude: &conversations.Claude{EnvFile: env}}
	}
	// A conversation whose project holds the key directory (its engines
	// mask the files there alone), naming no env file of its own.
	inProject := func(id, project string) *conversations.Conversation {
		return &conversations.Conversation{ID: id, Project: project, EngineKind: "claude", Claude: &conversations.Claude{}}
	}
	for _, tc := range []struct {
		name    string
		cvs     []*conversations.Conversation
		verdict string
		detail  string
	}{
		{"none", nil, verdictOK, "no Claude conversation names an env file"},
		{"in a directory of keys", []*conversations.Conversation{cl("a", good)}, verdictOK, "1 env file readable"},
		{"masked alone", []*conversations.Conversation{cl("a", good), cl("b", beside)}, verdictWarn, "1 of 2 env files are masked alone in some project's engines (their directory holds other files, or lies in that project): a save by rename unmasks one in the engines running then: " + beside + " (b)"},
		{"in another's project", []*conversations.Conversation{cl("a", good), inProject("c", home)}, verdictWarn, "1 of 1 env files are masked alone in some project's engines (their directory holds other files, or lies in that project): a save by rename unmasks one in the engines running then: " + good + " (a)"},
		{"mosaic's configuration directory holds an agent directory", []*conversations.Conversation{cl("a", good), agentIn}, verdictWarn,
			"mosaic's configuration directory " + config + " holds " + agentIn.Engine.AgentDir + ", which a conversation's engine works in or runs from, so no engine masks it whole: only " + filepath.Join(config, "keys") + " is"},
		{"its keys directory holds a project", []*conversations.Conversation{cl("a", good), inProject("k", filepath.Join(config, "keys", "proj"))}, verdictWarn,
			"so no engine masks it whole: nor its keys directory " + filepath.Join(config, "keys") + " (it holds such a path too, or is not a directory)"},
		{"no key", []*conversations.Conversation{cl("a", good), cl("e", write(filepath.Join(keys, "e.env"), "ANTHROPIC_BASE_URL=http://127.0.0.1:9\n")), {ID: "n", Project: filepath.Join(home, "p"), EngineKind: "claude", Claude: &conversations.Claude{}}}, verdictWarn,
			"2 Claude conversations have no key, so Claude Code answers each of their prompts \"Not logged in\" (their engines never read ~/.claude nor mosaic's environment): e (" + filepath.Join(keys, "e.env") + " sets neither ANTHROPIC_API_KEY nor ANTHROPIC_AUTH_TOKEN), n (no env file)"},
		{"through a link", []*conversations.Conversation{cl("a", filepath.Join(link, "a.env"))}, verdictFail, "1 of 1 env files cannot be read as a launch reads them: a: env-file: env file " + filepath.Join(link, "a.env") + ": " + link + " is a symlink"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			found, err := judgeEnvFiles(home, tc.cvs)
			r := judge(check{Name: "env-files"}, found, err)
			if r.Verdict != tc.verdict || !strings.Contains(r.Detail, tc.detail) {
				t.Errorf("%s: %q; want %s: %q", r.Verdict, r.Detail, tc.verdict, tc.detail)
			}
			if tc.verdict == verdictFail && !strings.Contains(r.Fix, "--resume-session "+tc.cvs[0].SessionKey()+" --env-file FILE --replace") {
				t.Errorf("fix %q does not name the conv add that keeps the session", r.Fix)
			}
		})
	}
	t.Run("mosaic's configuration directory a link", func(t *testing.T) {
		// GNU stow's way: the directory itself links into a dotfiles tree.
		if err := os.MkdirAll(filepath.Dir(config), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(t.TempDir(), config); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.Remove(config) })
		found, err := judgeEnvFiles(home, []*conversations.Conversation{cl("a", good)})
		r := judge(check{Name: "env-files"}, found, err)
		want := "mosaic's configuration directory " + config + " is a link or no directory (a mask there would land where it leads), so no engine masks it whole: only " + filepath.Join(config, "keys") + " is"
		if r.Verdict != verdictWarn || !strings.Contains(r.Detail, want) || !strings.Contains(r.Fix, "make "+config+" a directory of its own") {
			t.Errorf("%s: %q (fix %q); want a warning: %q", r.Verdict, r.Detail, r.Fix, want)
		}
	})
}

// TestDoctorPinsNoEngine: a conversation registered without an engine (no
// pi on PATH at `conv add`) has no pin to check. The check says so and
// names the `conv add --engine PATH --replace` that gives it one, instead
// of an empty pin read relative to doctor's own directory (a package.json
// there was taken for the engine's) and a fix without --engine, which
// registers it again without one.
func TestDoctorPinsNoEngine(t *testing.T) {
	_, cv := pinsHome(t)
	saveConv(t, cv)
	// doctor run in a JavaScript project of the user's.
	js := t.TempDir()
	if err := os.WriteFile(filepath.Join(js, "package.json"), []byte(`{"name":"my-app","version":"1.2.3"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Chdir(js)
	_, err := checkPins(context.Background())
	var f *finding
	if !errors.As(err, &f) || f.verdict != verdictFail {
		t.Fatalf("checkPins: %v; want a failure", err)
	}
	if !strings.Contains(f.msg, cv.ID+": no engine") || strings.Contains(f.msg, "package.json") || strings.Contains(f.msg, "1.2.3") {
		t.Errorf("detail %q; want %s: no engine, and nothing of a package.json", f.msg, cv.ID)
	}
	if !strings.Contains(f.fix, "mosaicctl conv add --project "+cv.Project+" --seat alice --session "+cv.Session+" --engine PATH --replace`") {
		t.Errorf("fix %q; want the conv add --engine PATH --replace of %s", f.fix, cv.ID)
	}
}

// TestDoctorPinsExtension: an admitted extension that changed since `conv
// add` refuses the launch engine-pin-mismatch (pi.Command checks each),
// so the pins check fails for it too, and its fix pins it again with the
// extension named: the re-add keeps only the flags given.
func TestDoctorPinsExtension(t *testing.T) {
	entry, _ := fakeEngine(t, stubmodel.Script{})
	home, cv := pinsHome(t)
	ext := filepath.Join(home, "ext.ts")
	if err := os.WriteFile(ext, []byte("export default function () {}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := pinEngine(cv, entry, ""); err != nil {
		t.Fatal(err)
	}
	if err := pinExtensions(cv, []string{ext}); err != nil {
		t.Fatal(err)
	}
	saveConv(t, cv)
	if _, err := checkPins(context.Background()); err != nil {
		t.Fatalf("checkPins before the change: %v", err)
	}
	if err := os.WriteFile(ext, []byte("export default function () { /* changed */ }\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := checkPins(context.Background())
	var f *finding
	if !errors.As(err, &f) || f.verdict != verdictFail {
		t.Fatalf("checkPins after the extension changed: %v; want a failure", err)
	}
	if !strings.Contains(f.msg, cv.ID+": engine-pin-mismatch: extension "+ext+" changed") {
		t.Errorf("detail %q; want the changed extension", f.msg)
	}
	if !strings.Contains(f.fix, " --extension "+ext+" --replace`") {
		t.Errorf("fix %q; want the re-add to name --extension %s", f.fix, ext)
	}
}

// pinsHome points mosaic's homes at a fresh directory, home, and returns
// a conversation of seat alice there, not yet saved nor pinned.
func pinsHome(t *testing.T) (string, *conversations.Conversation) {
	t.Helper()
	home := t.TempDir()
	t.Setenv("XDG_CONFIG_HOME", filepath.Join(home, "config"))
	t.Setenv("XDG_STATE_HOME", filepath.Join(home, "state"))
	project := filepath.Join(home, "app")
	sessions := filepath.Join(project, ".pi", "state", "alice", "sessions")
	if err := os.MkdirAll(sessions, 0o755); err != nil {
		t.Fatal(err)
	}
	return home, &conversations.Conversation{ID: conversations.ID(project, "alice", "main.jsonl"), Project: project, Seat: "alice",
		Workspace: conversations.DefaultWorkspace, Session: filepath.Join(sessions, "main.jsonl")}
}

// saveConv registers cv in the conversations store of the homes set.
func saveConv(t *testing.T, cv *conversations.Conversation) {
	t.Helper()
	s, err := conversations.Open()
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Save(cv); err != nil {
		t.Fatal(err)
	}
}

// TestJudgeYama: Yama's ptrace_scope 1, 2 or 3 is ok and said; a kernel
// without Yama, or ptrace_scope 0, warns that a tool can attach to its
// engine, with the fix; a file that cannot be read or says no scope Yama
// knows warns naming it.
func TestJudgeYama(t *testing.T) {
	dir := t.TempDir()
	write := func(name, s string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	absent := filepath.Join(dir, "absent")
	noYama := write("lsm-no-yama", "lockdown,capability,landlock,apparmor")
	withYama := write("lsm-yama", "lockdown,capability,yama,apparmor")
	attach := "a tool of the engine's uid can attach to its engine"
	for _, tc := range []struct {
		name      string
		scope     string // the ptrace_scope file's path
		lsm       string
		verdict   string
		detail    string
		fix       string
		notDetail string
	}{
		{"absent", absent, absent, verdictWarn, "no Yama in this kernel (no " + absent + "): " + attach, "CONFIG_SECURITY_YAMA=y", ""},
		{"absent, modules listed", absent, noYama, verdictWarn, "no Yama in this kernel (no " + absent + "; its security modules, " + noYama + ": lockdown,capability,landlock,apparmor): " + attach, "10-ptrace.conf", ""},
		{"absent, yama listed", absent, withYama, verdictWarn, withYama + " lists yama, but there is no " + absent, "/proc is this kernel's own", ""},
		{"0", write("zero", "0\n"), absent, verdictWarn, "kernel.yama.ptrace_scope=0 (classic: any process of the same uid may attach): " + attach, "`sudo sysctl kernel.yama.ptrace_scope=1`, and at every boot: `echo kernel.yama.ptrace_scope=1 | sudo tee /etc/sysctl.d/10-ptrace.conf`", ""},
		{"1", write("one", "1\n"), absent, verdictOK, "kernel.yama.ptrace_scope=1 (restricted: only to an ancestor): a tool cannot attach to its engine", "", attach},
		{"2", write("two", "2\n"), absent, verdictOK, "kernel.yama.ptrace_scope=2 (admin-only", "", attach},
		{"3", write("three", "3\n"), absent, verdictOK, "kernel.yama.ptrace_scope=3 (no attach at all)", "", attach},
		{"garbage", write("garbage", "restricted\n"), absent, verdictWarn, "garbage reads \"restricted\", not a ptrace_scope Yama knows", "kernel.yama.ptrace_scope=1", ""},
		{"out of range", write("four", "4\n"), absent, verdictWarn, "four reads \"4\", not a ptrace_scope Yama knows", "kernel.yama.ptrace_scope=1", ""},
		{"empty", write("empty", ""), absent, verdictWarn, "empty reads \"\", not a ptrace_scope Yama knows", "kernel.yama.ptrace_scope=1", ""},
		// A directory cannot be read as a file, even by root.
		{"unreadable", dir, absent, verdictWarn, "cannot read Yama's ptrace_scope (read " + dir + ": is a directory)", "`cat " + dir + "`", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			found, err := judgeYama(tc.scope, tc.lsm)
			r := judge(check{Name: "yama", Fix: yamaFix}, found, err)
			if r.Verdict != tc.verdict || !strings.Contains(r.Detail, tc.detail) || !strings.Contains(r.Fix, tc.fix) {
				t.Fatalf("%+v; want %s, detail with %q, fix with %q", r, tc.verdict, tc.detail, tc.fix)
			}
			if tc.notDetail != "" && strings.Contains(r.Detail, tc.notDetail) {
				t.Fatalf("%+v: an ok line says %q", r, tc.notDetail)
			}
			if r.Verdict == verdictOK && r.Fix != "" {
				t.Fatalf("%+v: an ok line with a fix", r)
			}
		})
	}
}

// TestCheckYamaReadsItsFile: the check doctor runs reads yamaScopeFile.
func TestCheckYamaReadsItsFile(t *testing.T) {
	p := filepath.Join(t.TempDir(), "ptrace_scope")
	if err := os.WriteFile(p, []byte("0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	defer func(old string) { yamaScopeFile = old }(yamaScopeFile)
	yamaScopeFile = p
	if _, err := checkYama(context.Background()); err == nil || !strings.Contains(err.Error(), "kernel.yama.ptrace_scope=0") {
		t.Fatalf("checkYama with %s reading 0: %v", p, err)
	}
}
