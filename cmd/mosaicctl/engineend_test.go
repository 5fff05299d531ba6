package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mosaic-agents/mosaic/contrib/sandboxtest"
	"github.com/mosaic-agents/mosaic/contrib/stubmodel"
)

// brokenNode is an interpreter that answers --version like Node 22 and
// otherwise floods stderr, says why it cannot run and exits 1: what a user
// whose engine finds the wrong node sees.
const brokenNode = `#!/bin/sh
if [ "$1" = "--version" ]; then echo v22.23.3; exit 0; fi
head -c 3000000 /dev/zero | tr '\0' 'x' | fold -w 100 >&2
i=0
while [ $i -lt 30 ]; do echo "broken node: line $i" >&2; i=$((i+1)); done
echo "SyntaxError: Unexpected token '??='" >&2
exit 1
`

// TestEngineExitShownOnRealCLI: an engine that writes to stderr and exits
// 1 at start. The prompt's refusal, status (table and JSON) and the
// journal show its exit status and the last lines of its stderr; the
// journal gets a bounded copy of the flood and says how much it dropped.
func TestEngineExitShownOnRealCLI(t *testing.T) {
	sandboxtest.Require(t)
	bin := sandboxtest.Bin(t, "mosaicctl")
	pi := os.Getenv("MOSAIC_PI")
	if pi == "" {
		sandboxtest.Unavailable(t, "MOSAIC_PI is not set: `make test` installs the pinned Pi")
	}
	entry := ""
	b, err := os.ReadFile(pi)
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "# pi-entry: "); ok {
			entry = v
		}
	}
	if entry == "" {
		t.Fatalf("%s is not a contrib/pi/install.sh wrapper", pi)
	}
	dir := t.TempDir()
	node := filepath.Join(dir, "node")
	wrapper := filepath.Join(dir, "pi")
	if err := os.WriteFile(node, []byte(brokenNode), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(wrapper, []byte(fmt.Sprintf("#!/bin/sh\n# pi-entry: %s\n# pi-node: %s\nexec %q %q \"$@\"\n", entry, node, node, entry)), 0o755); err != nil {
		t.Fatal(err)
	}
	id, _, _ := startConversation(t, bin, "broken", "--engine", wrapper)

	r := run(t, bin, "prompt", "--take", id, "hello")
	if r.code != 2 || !strings.HasPrefix(r.stderr, "mosaicctl: ") || !strings.Contains(r.stderr, "exited (exit status 1)") ||
		!strings.Contains(r.stderr, "\n    SyntaxError: Unexpected token '??='") || !strings.Contains(r.stderr, "broken node: line 29") ||
		strings.Contains(r.stderr, "broken node: line 5\n") {
		t.Fatalf("prompt to an engine that exited: exit %d, stderr %q; want the refusal, the exit status and the stderr tail", r.code, r.stderr)
	}

	st := readStatus(t, bin, id)
	e := st.Binding
	if e == nil || e.EngineEnd == nil || e.EngineEnd.Status != "exit status 1" || len(e.EngineEnd.Stderr) == 0 || len(e.EngineEnd.Stderr) > 20 ||
		e.EngineEnd.Stderr[len(e.EngineEnd.Stderr)-1] != "SyntaxError: Unexpected token '??='" || !e.EngineEnd.StderrCut {
		t.Fatalf("status --json binding: %+v", e)
	}
	if out := mustRun(t, bin, "status", id); !strings.Contains(out, id+": engine of execution "+e.Execution+" exited (exit status 1)") ||
		!strings.Contains(out, "    SyntaxError: Unexpected token '??='") {
		t.Fatalf("status table does not show the engine's end:\n%s", out)
	}

	// attach shows it as the notice under its status line.
	tsock := filepath.Join(t.TempDir(), "tmux.sock")
	t.Cleanup(func() { exec.Command("tmux", "-S", tsock, "kill-server").Run() })
	p := startPane(t, tsock, "attach", bin+" attach "+id)
	p.wait("the engine's exit as a notice", func(rows []string) bool {
		n := notice(rows, id)
		return strings.Contains(n, "engine "+e.Execution+" exited (exit status 1); stderr: SyntaxError: Unexpected")
	})
	p.keys("C-c")

	svc := "mosaic-conv@" + id + ".service"
	ends := journal(t, "-u", svc, "MOSAIC_EXIT_STATUS=exit status 1")
	if !strings.Contains(field(ends[0], "MOSAIC_ENGINE_STDERR"), "SyntaxError: Unexpected token") || !strings.Contains(field(ends[0], "MESSAGE"), "SyntaxError") {
		t.Fatalf("journal entry of the exit: %v", ends[0])
	}
	all := journal(t, "-u", svc)
	forwarded, dropped := 0, false
	for _, e := range all {
		m := field(e, "MESSAGE")
		if strings.HasPrefix(m, "engine "+e2exec(st)+": ") {
			forwarded += len(m)
		}
		dropped = dropped || strings.Contains(m, "bytes of engine stderr dropped")
	}
	if !dropped || forwarded > 200<<10 {
		t.Fatalf("the journal got %d bytes of a 3 MB stderr flood (dropped notice: %v)", forwarded, dropped)
	}
}

func e2exec(st convStatus) string {
	if st.Binding == nil {
		return ""
	}
	return st.Binding.Execution
}

// field reads a journal field from `journalctl -o json`, which gives a
// field that is not plain text as an array of bytes.
func field(e map[string]any, name string) string {
	switch v := e[name].(type) {
	case string:
		return v
	case []any:
		b := make([]byte, 0, len(v))
		for _, x := range v {
			if f, ok := x.(float64); ok {
				b = append(b, byte(f))
			}
		}
		return string(b)
	}
	raw, _ := json.Marshal(e[name])
	return string(raw)
}

// TestEngineStderrNULIsOneEntry: journald's stream reader ends an entry at
// NUL as at LF, so an engine (or a tool that inherits its stderr) writing
// NUL-laden lines must still get one journal entry per forwarded line,
// each with the controller's `engine EXEC: ` prefix: passed through, a
// line of 100 NULs was 101 entries (past the 50 lines a second), and the
// text after a NUL an entry of its own that reads as the controller's.
func TestEngineStderrNULIsOneEntry(t *testing.T) {
	sandboxtest.Require(t)
	bin := sandboxtest.Bin(t, "mosaicctl")
	entry, _ := fakeEngine(t, stubmodel.Script{})
	sh, err := os.ReadFile(entry)
	if err != nil {
		t.Fatal(err)
	}
	lines := []struct{ name, printf string }{
		{"forged line", `nul-line 0: a\000mosaic: forged by the engine\000`},
		{"many NULs", "nul-line 1: " + strings.Repeat(`x\000`, 100)},
		{"NUL first and escapes", `\000nul-line 2: \033[31m\000x`},
	}
	var writes strings.Builder
	for _, l := range lines {
		fmt.Fprintf(&writes, "printf '%s\\n' >&2\n", l.printf)
	}
	if err := os.WriteFile(entry, []byte(strings.Replace(string(sh), "exec ", writes.String()+"exec ", 1)), 0o755); err != nil {
		t.Fatal(err)
	}
	id, _, _ := startConversation(t, bin, "nul", "--engine", entry, "--provider", "fakellm", "--model", "fake-model")
	if r := run(t, bin, "hello", id); r.code != 0 { // the controller runs, the engine is launched
		t.Fatalf("hello: exit %d %s", r.code, r.stderr)
	}
	svc := "mosaic-conv@" + id + ".service"
	all := journalUntil(t, func(es []map[string]any) bool {
		n := 0
		for _, e := range es {
			if strings.Contains(field(e, "MESSAGE"), "nul-line 2: ") {
				n++
			}
		}
		return n > 0
	}, "-u", svc)
	for i, l := range lines {
		t.Run(l.name, func(t *testing.T) {
			mark := fmt.Sprintf("nul-line %d: ", i)
			var got []string
			for _, e := range all {
				if m := field(e, "MESSAGE"); strings.Contains(m, mark) {
					got = append(got, m)
				}
			}
			if len(got) != 1 || !strings.HasPrefix(got[0], "engine ") || strings.ContainsAny(got[0], "\x00\x1b") {
				t.Fatalf("line %q: %d journal entries %q, want one with the prefix, its controls escaped", l.printf, len(got), got)
			}
		})
	}
	// Nothing after a NUL became an entry of its own.
	var strays []string
	for _, e := range all {
		if m := field(e, "MESSAGE"); m == "x" || strings.HasPrefix(m, "mosaic: forged") || strings.HasPrefix(m, "\x1b") {
			strays = append(strays, m)
		}
	}
	if len(strays) > 0 {
		t.Errorf("%d entries of text after a NUL, without the prefix: %q", len(strays), strays[:min(len(strays), 5)])
	}
}
