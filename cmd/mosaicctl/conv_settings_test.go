package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/mosaic-agents/mosaic/contrib/sandboxtest"
	"github.com/mosaic-agents/mosaic/contrib/stubmodel"
)

// TestConvLimitsAsTyped, as a user types it: conv add refuses limits that
// systemd would read differently (naming the flag, the value and an
// example), conv show prints the normalized values and what the running
// engine has, conv add --replace says what changed and when it applies,
// and stop + recover launches with the new limits. Before, 4GB was
// accepted and became MemoryMax=4 bytes, and recover launched with the
// old limits.
func TestConvLimitsAsTyped(t *testing.T) {
	sandboxtest.Require(t)
	bin := sandboxtest.Bin(t, "mosaicctl")
	entry, _ := fakeEngine(t, stubmodel.Script{Turns: []stubmodel.Turn{{Text: []string{"Hello."}}}})

	proj, session := project(t, "refused")
	for _, tc := range []struct{ flag, value, want string }{
		{"--memory-max", "4GB", `--memory-max "4GB": not a size systemd accepts; use 4G`},
		{"--memory-max", "512MiB", `--memory-max "512MiB"`},
		{"--memory-max", "10", ""}, // 10 bytes is what systemd reads too: accepted
		{"--cpu-quota", "200", `--cpu-quota "200": not a CPU quota systemd accepts: it must end in %`},
		{"--cpu-quota", "0%", `--cpu-quota "0%"`},
		{"--cpu-quota", "-5%", `--cpu-quota "-5%"`},
		{"--cpu-quota", "abc", `--cpu-quota "abc"`},
		{"--tasks-max", "0", `--tasks-max "0"`},
	} {
		r := run(t, bin, "conv", "add", "--project", proj, "--seat", "refused", "--session", session,
			"--engine", entry, "--replace", tc.flag, tc.value)
		if tc.want == "" {
			if r.code != 0 {
				t.Errorf("%s %s refused: exit %d, %s", tc.flag, tc.value, r.code, r.stderr)
			}
			continue
		}
		if r.code == 0 || !strings.Contains(r.stderr, tc.want) {
			t.Errorf("%s %s: exit %d, stderr %q; want a refusal containing %q", tc.flag, tc.value, r.code, r.stderr, tc.want)
		}
	}

	flags := []string{"--engine", entry, "--provider", "fakellm", "--model", "fake-model"}
	id, proj, _ := startConversation(t, bin, "limits", append(flags, "--memory-max", "1.5G", "--tasks-max", "300", "--cpu-quota", "50%")...)
	if r := run(t, bin, "prompt", "--take", id, "hi"); r.code != 0 {
		t.Fatalf("prompt: exit %d, %s", r.code, r.stderr)
	}
	show := mustRun(t, bin, "conv", "show", id)
	for _, want := range []string{`memory_max = "1536M"`, `tasks_max = "300"`, `cpu_quota = "50%"`,
		`#   memory_max = "1536M"`, `#   tasks_max = "300"`, `#   cpu_quota = "50%"`} {
		if !strings.Contains(show, want) {
			t.Fatalf("conv show lacks %s:\n%s", want, show)
		}
	}
	if strings.Contains(show, "differ") {
		t.Fatalf("conv show says the running limits differ:\n%s", show)
	}

	session = proj + "/.pi/state/limits/sessions/main.jsonl"
	r := run(t, bin, append([]string{"conv", "add", "--project", proj, "--seat", "limits", "--session", session, "--replace",
		"--memory-max", "2G", "--tasks-max", "300", "--cpu-quota", "50%"}, flags...)...)
	if r.code != 0 || !strings.Contains(r.stderr, "limits.memory_max: 1536M -> 2G") || !strings.Contains(r.stderr, "apply at the next launch") ||
		!strings.Contains(r.stderr, "`mosaicctl recover --take "+id+"`") || strings.Contains(r.stderr, "replaced the engine") {
		t.Fatalf("conv add --replace: exit %d, stderr %q; want what changed and when it applies", r.code, r.stderr)
	}
	show = mustRun(t, bin, "conv", "show", id)
	if !strings.Contains(show, `memory_max = "2G"`) || !strings.Contains(show, `#   memory_max = "1536M"`) || !strings.Contains(show, "differ") {
		t.Fatalf("conv show after --replace does not show the configured and the running values apart:\n%s", show)
	}
	t.Logf("conv add --replace said:\n%s\nconv show then printed:\n%s", r.stderr, show)

	if r := run(t, bin, "stop", "--take", "--yes", id); r.code != 0 {
		t.Fatalf("stop: exit %d, %s", r.code, r.stderr)
	}
	if r := run(t, bin, "recover", "--take", id); r.code != 0 {
		t.Fatalf("recover: exit %d, %s", r.code, r.stderr)
	}
	show = mustRun(t, bin, "conv", "show", id)
	running := regexp.MustCompile(`(?m)^# running engine .*\n#   memory_max = "([^"]*)"`).FindAllStringSubmatch(show, -1)
	if len(running) != 1 || running[0][1] != "2G" || strings.Contains(show, "differ") {
		t.Fatalf("after stop and recover, the running engine does not have the new limits:\n%s", show)
	}
}

// TestConvAddPinsTheUsersNode is the ordinary npm install: the pinned Pi
// registered by its node_modules/.bin/pi (an entry with "#!/usr/bin/env
// node") by a user whose PATH has a Node 22 first, then started by the
// user manager, whose PATH finds the system's node first (Debian's
// /usr/bin/node is Node 20 here; none at all elsewhere). The engine runs
// on the Node pinned at conv add and answers. Before, conv add pinned no
// interpreter, the engine ran through env with the manager's PATH and
// died on its first line.
func TestConvAddPinsTheUsersNode(t *testing.T) {
	sandboxtest.Require(t)
	bin := sandboxtest.Bin(t, "mosaicctl")
	wrapper := os.Getenv("MOSAIC_PI")
	if wrapper == "" {
		sandboxtest.Unavailable(t, "MOSAIC_PI is not set: `make test` installs the pinned Pi")
	}
	b, err := os.ReadFile(wrapper)
	if err != nil {
		t.Fatal(err)
	}
	var node, entry string
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "# pi-node: "); ok {
			node = v
		}
		if v, ok := strings.CutPrefix(l, "# pi-entry: "); ok {
			entry = v
		}
	}
	if node == "" || entry == "" {
		t.Fatalf("MOSAIC_PI %s is not a contrib/pi/install.sh wrapper", wrapper)
	}
	_, pkg, _ := strings.Cut(entry, "/node_modules/")
	npmBin := filepath.Join(strings.TrimSuffix(entry, pkg), ".bin", "pi") // what npm links: node_modules/.bin/pi
	if target, err := filepath.EvalSymlinks(npmBin); err != nil || target != entry {
		t.Fatalf("%s does not lead to the entry %s (%s, %v)", npmBin, entry, target, err)
	}
	userBin := t.TempDir() // the user's own bin directory, with their Node 22
	if err := os.Symlink(node, filepath.Join(userBin, "node")); err != nil {
		t.Fatal(err)
	}

	stub, err := stubmodel.Start(stubmodel.Script{Turns: []stubmodel.Turn{{Text: []string{"Hello ", "from Node 22."}}}})
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
	proj, session := project(t, "npm")
	add := exec.Command(bin, "conv", "add", "--project", proj, "--seat", "npm", "--session", session, "--engine", npmBin,
		"--provider", model.Provider, "--model", model.Model, "--agent-dir", model.AgentDir)
	add.Env = append(os.Environ(), "PATH="+userBin+":/usr/local/bin:/usr/bin:/bin")
	r := runCmd(t, add)
	if r.code != 0 {
		t.Fatalf("conv add: exit %d, %s", r.code, r.stderr)
	}
	id := strings.TrimSpace(r.stdout)
	show := mustRun(t, bin, "conv", "show", id)
	if !strings.Contains(show, "node = \""+node+"\"") || !strings.Contains(show, `node_version = "22.`) {
		t.Fatalf("conv show does not pin the user's Node %s:\n%s", node, show)
	}
	sock := "mosaic-conv@" + id + ".socket"
	mustRun(t, "systemctl", "--user", "start", sock)
	t.Cleanup(func() { endConversation(t, bin, id) })
	if r := run(t, bin, "prompt", "--take", id, "say hello"); r.code != 0 || r.stdout != "Hello from Node 22.\n" {
		t.Fatalf("prompt: exit %d, stdout %q, stderr %q; want the engine to run on the pinned Node", r.code, r.stdout, r.stderr)
	}

	// A user whose PATH finds only an old Node is refused at conv add,
	// with the fix.
	old := t.TempDir()
	script := "#!/bin/sh\nif [ \"$1\" = --version ]; then echo v20.11.1; exit 0; fi\nexit 1\n"
	if err := os.WriteFile(filepath.Join(old, "node"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	proj2, session2 := project(t, "old")
	add = exec.Command(bin, "conv", "add", "--project", proj2, "--seat", "old", "--session", session2, "--engine", npmBin)
	add.Env = append(os.Environ(), "PATH="+old+":/usr/bin:/bin")
	if r := runCmd(t, add); r.code == 0 || !strings.Contains(r.stderr, "engine-pin-mismatch") || !strings.Contains(r.stderr, "Pi needs node >=22.19.0") ||
		!strings.Contains(r.stderr, "--node PATH") {
		t.Fatalf("conv add with Node 20 first on PATH: exit %d, stderr %q; want engine-pin-mismatch naming the range and --node", r.code, r.stderr)
	}
}

// TestConvDevice: `conv add --device` refuses what is no character
// device below /dev (a file, a directory, a link out of /dev, where the
// engine's own ptys go) before anything is saved; a device given is in
// the engine's /dev, one not given is not.
func TestConvDevice(t *testing.T) {
	sandboxtest.Require(t)
	bin := sandboxtest.Bin(t, "mosaicctl")
	entry, _ := fakeEngine(t, stubmodel.Script{Turns: []stubmodel.Turn{{Text: []string{"Hello."}}}})
	if fi, err := os.Stat("/dev/fuse"); err != nil || fi.Mode()&os.ModeCharDevice == 0 {
		sandboxtest.Unavailable(t, "no /dev/fuse to give the engine (%v)", err)
	}
	proj, session := project(t, "refused")
	for _, dev := range []string{"/etc/passwd", "/dev/net", "/dev/pts", "/dev/fd", "/dev/pts/ptmx", "/dev/no-such"} {
		r := run(t, bin, "conv", "add", "--project", proj, "--seat", "refused", "--session", session, "--engine", entry, "--device", dev)
		if r.code == 0 || !strings.Contains(r.stderr, "--device") {
			t.Errorf("--device %s: exit %d, stderr %q; want a refusal naming --device", dev, r.code, r.stderr)
		}
	}
	if r := run(t, bin, "conv", "list"); strings.Contains(r.stdout, proj) {
		t.Errorf("a refused conv add saved the conversation:\n%s", r.stdout)
	}
	id, _, _ := startConversation(t, bin, "devices", "--engine", entry, "--provider", "fakellm", "--model", "fake-model", "--device", "/dev/fuse")
	if r := run(t, bin, "prompt", "--take", id, "hi"); r.code != 0 {
		t.Fatalf("prompt: exit %d, %s", r.code, r.stderr)
	}
	if show := mustRun(t, bin, "conv", "show", id); !strings.Contains(show, `devices = ["/dev/fuse"]`) {
		t.Fatalf("conv show lacks the device:\n%s", show)
	}
	var st convStatus
	if err := json.Unmarshal([]byte(mustRun(t, bin, "status", "--json", id)), &st); err != nil || st.Scope == nil {
		t.Fatalf("status --json: %v %+v", err, st)
	}
	pids := enginePIDs(t, st.Scope.Name)
	if len(pids) == 0 {
		t.Fatal("no engine process")
	}
	ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/root/dev", pids[len(pids)-1]))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	if !slices.Contains(names, "fuse") || slices.Contains(names, "net") || slices.Contains(names, "kvm") {
		t.Errorf("the engine's /dev holds %v; want fuse, given, and no other of the machine's", names)
	}
}
