package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mosaic-agents/mosaic/client"
	"github.com/mosaic-agents/mosaic/contrib/fakeanthropic"
	"github.com/mosaic-agents/mosaic/contrib/sandboxtest"
	"github.com/mosaic-agents/mosaic/history"
	"github.com/mosaic-agents/mosaic/units"
)

// TestClaudeConversation drives a Claude Code 2.1.328 conversation
// through mosaicctl as a user types it, against the loopback fake
// Messages API: conv add --engine-kind claude, a prompt that streams, a
// Bash tool that needs approval (allowed once with approve --take --yes)
// and leaves a setsid child behind, a force stop proven with the child
// dead, recover (--resume on the same session) and a second prompt. The
// user manager's environment carries a decoy base URL and key: the fake
// is the only thing contacted, always with the env file's key.
func TestClaudeConversation(t *testing.T) {
	sandboxtest.Require(t)
	bin := sandboxtest.Bin(t, "mosaicctl")
	cl := sandboxtest.Claude(t)
	fake, decoy := sandboxtest.FakeAnthropic(t), sandboxtest.FakeAnthropic(t)
	// The controller's environment (the user manager's) points elsewhere:
	// none of it may reach the engine.
	mustRun(t, "systemctl", "--user", "set-environment", "ANTHROPIC_BASE_URL="+decoy.URL, "ANTHROPIC_API_KEY=controller-leak")
	t.Cleanup(func() { run(t, "systemctl", "--user", "unset-environment", "ANTHROPIC_BASE_URL", "ANTHROPIC_API_KEY") })

	mustRun(t, bin, "install")
	t.Cleanup(func() { run(t, bin, "uninstall", "--force") })
	proj, _ := project(t, "claude")
	env := writeEnvFile(t, "ANTHROPIC_API_KEY=env-file-key\nANTHROPIC_BASE_URL="+fake.URL+"\n", 0o600)
	id := strings.TrimSpace(mustRun(t, bin, "conv", "add", "--project", proj, "--seat", "claude",
		"--engine-kind", "claude", "--engine", cl, "--env-file", env))
	mustRun(t, "systemctl", "--user", "start", "mosaic-conv@"+id+".socket")
	t.Cleanup(func() { endConversation(t, bin, id) })

	out := mustRun(t, bin, "prompt", "--take", id, "hello there")
	if !strings.Contains(out, "Hello from fake. You said: hello there") {
		t.Fatalf("prompt printed %q", out)
	}

	// A Bash call asks first; approve --yes allows it once. The command
	// leaves a child in its own session behind, and ends only once that
	// child is in its session (the marker is made after setsid): on a
	// loaded machine (CI, 02:38 UTC) the child was once not found after
	// the turn, which a child killed with the command's process group
	// before it reached setsid would explain.
	marker := filepath.Join(proj, "ran")
	cmd := "setsid sh -c 'touch " + marker + "; exec sleep 6173' >/dev/null 2>&1 & while [ ! -e " + marker + " ]; do sleep 0.05; done"
	p, pout := promptAwaitingApproval(t, bin, id, "please BASH{"+cmd+"}", fake)
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("the tool ran before the approval")
	}
	if r := run(t, bin, "approve", "--take", id, "--yes"); r.code != 0 || !strings.Contains(r.stdout, "allow-once") {
		t.Fatalf("approve --yes: exit %d, %q %q", r.code, r.stdout, r.stderr)
	}
	if err := p.Wait(); err != nil {
		t.Fatalf("prompt with the tool: %v\n%s", err, pout.String())
	}
	// approve --take re-projects the decision under a new approval id
	// before answering it: the prompt named it once, not again then.
	if n := strings.Count(pout.String(), "the turn waits for approval"); n != 1 {
		t.Fatalf("the prompt named the approval %d times, want once:\n%s", n, pout.String())
	}
	if !strings.Contains(pout.String(), "TOOL_DONE") {
		t.Fatalf("the tool's turn printed %q", pout.String())
	}
	if _, err := os.Stat(marker); err != nil {
		t.Fatalf("the allowed tool did not run: %v", err)
	}
	// The engine runs in a PID namespace of its own: the child is found
	// by its command line from here.
	child := func() bool { return len(pidsOf("sleep\x006173")) > 0 }
	if !child() {
		t.Fatal("the setsid child is not running")
	}

	// Force stop: the CLI would leave the child; the cohort stop ends it.
	if r := run(t, bin, "stop", "--take", "--yes", id); r.code != 0 || !strings.Contains(r.stdout, "stopped") {
		t.Fatalf("stop: exit %d, %q %q", r.code, r.stdout, r.stderr)
	}
	if child() {
		t.Fatalf("the setsid child %v outlived the proven stop", pidsOf("sleep\x006173"))
	}

	// Recover relaunches with --resume on the same session, whose
	// transcript holds both turns.
	if r := run(t, bin, "recover", "--take", id); r.code != 0 || !strings.Contains(r.stdout, "launched: execution ") {
		t.Fatalf("recover: exit %d, %q %q", r.code, r.stdout, r.stderr)
	}
	out = mustRun(t, bin, "prompt", "--take", id, "second prompt")
	if !strings.Contains(out, "You said: second prompt") {
		t.Fatalf("second prompt printed %q", out)
	}

	// observe pages come from the transcript: both turns, the session's
	// UUID, the tool's result as a toolResult message.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	sock, err := units.SocketPath(id)
	if err != nil {
		t.Fatal(err)
	}
	oc, err := client.Dial(ctx, sock, client.Options{Name: "claude-test"})
	if err != nil {
		t.Fatal(err)
	}
	obs, err := oc.Observe(ctx)
	oc.Close()
	if err != nil {
		t.Fatal(err)
	}
	var page history.Page
	if err := json.Unmarshal(obs.History, &page); err != nil {
		t.Fatal(err)
	}
	var shown strings.Builder
	roles := map[string]int{}
	for _, p := range page.Parts {
		roles[p.Role]++
		for _, f := range p.Blocks {
			shown.WriteString(f.Content.Text + "\n")
		}
	}
	for _, want := range []string{"hello there", "You said: second prompt", "TOOL_DONE"} {
		if !strings.Contains(shown.String(), want) {
			t.Errorf("the observe page lacks %q: %s", want, shown.String())
		}
	}
	if roles["user"] < 2 || roles["assistant"] < 3 || roles["toolResult"] < 1 || page.Session == "" {
		t.Errorf("observe page: session %q, roles %v", page.Session, roles)
	}

	// Denied: the tool never runs and the model reads the denial.
	denied := filepath.Join(proj, "denied")
	p, pout = promptAwaitingApproval(t, bin, id, "please BASH{touch "+denied+"}", fake)
	if r := run(t, bin, "approve", "--take", id, "--no"); r.code != 0 || !strings.Contains(r.stdout, "deny") {
		t.Fatalf("approve --no: exit %d, %q %q", r.code, r.stdout, r.stderr)
	}
	if err := p.Wait(); err != nil || !strings.Contains(pout.String(), "denied") {
		t.Fatalf("the denied turn: %v, printed %q", err, pout.String())
	}
	if _, err := os.Stat(denied); err == nil {
		t.Fatal("the denied tool ran")
	}

	// Interrupted while the approval is pending: the CLI withdraws the
	// request, nothing runs, and no approval is left open.
	never := filepath.Join(proj, "never")
	p, _ = promptAwaitingApproval(t, bin, id, "please BASH{touch "+never+"}", fake)
	if r := run(t, bin, "interrupt", "--take", id); r.code != 0 {
		t.Fatalf("interrupt with an approval pending: exit %d, %q %q", r.code, r.stdout, r.stderr)
	}
	p.Wait()
	if _, err := os.Stat(never); err == nil {
		t.Fatal("the tool of the interrupted turn ran")
	}
	waitFor(t, func() bool { return strings.Contains(run(t, bin, "approve", id).stdout, "no open approvals") })

	reqs := fake.Requests()
	if len(reqs) < 4 {
		t.Fatalf("the fake saw %d requests: %+v", len(reqs), reqs)
	}
	session := ""
	for _, r := range reqs {
		if r.Unexpected || r.APIKey != "env-file-key" {
			t.Errorf("request %+v: want only POST /v1/messages with the env file's key", r)
		}
		if session == "" {
			session = r.Session
		}
		if r.Session != session {
			t.Errorf("request %d is of session %s, the first of %s: recover did not resume", r.N, r.Session, session)
		}
	}
	for _, r := range reqs {
		if strings.Contains(r.Arg, "second prompt") && r.Messages < 5 {
			t.Errorf("the second prompt's request holds %d messages: the resumed session lost its history", r.Messages)
		}
	}
	if d := decoy.Requests(); len(d) > 0 {
		t.Fatalf("the controller's environment reached the engine: the decoy saw %+v", d)
	}
	if page.Session != session {
		t.Errorf("the observe page is of session %q, the engine ran %s", page.Session, session)
	}
	if show := mustRun(t, bin, "conv", "show", id); !strings.Contains(show, `session = "`+session+`"`) {
		t.Fatalf("the engine ran session %s, conv show says:\n%s", session, show)
	}
}

// pidsOf lists the processes whose command line contains cmdline (NUL
// between the arguments).
func pidsOf(cmdline string) []int {
	var out []int
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline")); err == nil && strings.Contains(string(b), cmdline) {
			out = append(out, pid)
		}
	}
	return out
}

// promptAwaitingApproval starts `prompt --take` with text in the
// background and waits until its tool call is listed as an approval.
func promptAwaitingApproval(t *testing.T, bin, id, text string, fake *fakeanthropic.Server) (*exec.Cmd, *bytes.Buffer) {
	t.Helper()
	var out bytes.Buffer
	p := exec.Command(bin, "prompt", "--take", id, text)
	p.Stdout, p.Stderr = &out, &out
	if err := p.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Process.Kill() })
	var listed result
	for deadline := time.Now().Add(time.Minute); !strings.Contains(listed.stdout, "Bash"); time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			j := run(t, "bash", "-c", "journalctl --user --no-pager -o cat | grep -v connect | tail -40").stdout
			t.Fatalf("no approval listed: %q %q; the prompt printed %q; status %s\n%s\nfake: %+v", listed.stdout, listed.stderr, out.String(), run(t, bin, "status", id, "--json").stdout, j, fake.Requests())
		}
		listed = run(t, bin, "approve", id)
	}
	return p, &out
}

// approvedTurn prompts r's conversation with text, which asks the fake
// model for a tool use, consents to the approval it waits on and waits
// for the turn to end.
func (r claudeRig) approvedTurn(t *testing.T, text string) {
	t.Helper()
	p, _ := promptAwaitingApproval(t, r.bin, r.id, text, r.fake)
	if res := run(t, r.bin, "approve", "--take", r.id, "--yes"); res.code != 0 {
		t.Fatalf("approve --yes: exit %d, %q %q", res.code, res.stdout, res.stderr)
	}
	p.Wait()
}
