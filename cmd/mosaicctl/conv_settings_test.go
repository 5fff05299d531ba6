package main

import (
	"regexp"
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
		!strings.Contains(r.stderr, "mosaicctl recover "+id) || strings.Contains(r.stderr, "replaced the engine") {
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
