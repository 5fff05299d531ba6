package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mosaic-agents/mosaic/client"
	"github.com/mosaic-agents/mosaic/contrib/sandboxtest"
	"github.com/mosaic-agents/mosaic/contrib/stubmodel"
	"github.com/mosaic-agents/mosaic/protocol"
)

// TestOneShotVerbsOnRealPi drives the one-shot verbs as a script would, on
// the sandbox's real systemd with the pinned Pi and the stub model: a
// refusal without control, a prompt that prints its answer, a turn whose
// outcome is left unknown and then interrupted, a force stop refused
// without consent, declined on a terminal and done with --yes (its proof verified offline), a
// recovery that runs prompts again, and status before and after each.
func TestOneShotVerbsOnRealPi(t *testing.T) {
	sandboxtest.Require(t)
	pc := realPiConversation(t, "verbs", stubmodel.Script{Turns: []stubmodel.Turn{
		{Text: []string{"Hello ", "from the stub."}},
		{Text: []string{"and on "}, Endless: true},
	}})
	bin, id, stub := pc.bin, pc.id, pc.stub

	st := readStatus(t, bin, id)
	if st.Socket.ActiveState != "active" || st.Service.ActiveState != "inactive" || st.Claim != nil || st.Generation != nil {
		t.Fatalf("status before any client: %+v; want the socket listening, no controller, no claim, no generation", st)
	}

	// Without --take the connection is an observer: nothing is sent, and
	// the refusal names the flag that fixes it, as a command to type.
	r := run(t, bin, "prompt", id, "say hello")
	wantRefusal(t, r, "not-controller")
	if !strings.Contains(r.stderr, "`mosaicctl prompt --take "+id+" TEXT`") {
		t.Fatalf("the not-controller refusal does not name --take as a command: %q", r.stderr)
	}
	if got := stub.Requests(); len(got) != 0 {
		t.Fatalf("a refused prompt reached the model: %v", got)
	}
	// Flags after the positionals, as systemctl and git take them.
	if r := run(t, bin, "prompt", id, "--take", "say hello"); r.code != 0 || r.stdout != "Hello from the stub.\n" {
		t.Fatalf("prompt ID --take TEXT: exit %d, stdout %q, stderr %q; want the answer alone", r.code, r.stdout, r.stderr)
	}

	// The endless turn never settles: the verb gives up with the outcome
	// unknown (never "failed"), and an interrupt reconciles the turn.
	r = run(t, bin, "prompt", "--take", "--timeout", "5s", id, "go on forever")
	if r.code != exitUnknown || !strings.HasPrefix(r.stderr, "mosaicctl: outcome-unknown: ") {
		t.Fatalf("prompt of an endless turn with --timeout: exit %d, stderr %q; want %d outcome-unknown", r.code, r.stderr, exitUnknown)
	}
	if r := run(t, bin, "interrupt", "--take", id); r.code != 0 || !strings.HasPrefix(r.stdout, "reconciled: ") {
		t.Fatalf("interrupt --take: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}

	st = readStatus(t, bin, id)
	if st.Service.ActiveState != "active" || st.Service.MainPID == 0 || st.Claim == nil || st.Claim.State != "active" ||
		st.Scope == nil || st.Scope.ActiveState != "active" || st.Generation == nil || st.Binding == nil || st.Binding.State != "active" {
		t.Fatalf("status of a running conversation: %+v", st)
	}
	scope, gen := st.Scope.Name, *st.Generation

	// recover before a stop: the refusal's advice works as typed.
	r = run(t, bin, "recover", id, "--take")
	wantRefusal(t, r, "stop-proof")
	if !strings.Contains(r.stderr, "`mosaicctl stop --take --yes "+id+"`") {
		t.Fatalf("recover before a stop does not advise a stop that works as typed: %q", r.stderr)
	}

	// No terminal and no --yes: refused, after saying what would stop,
	// before taking control (the generation stays).
	r = run(t, bin, "stop", "--take", id)
	wantRefusal(t, r, "confirmation-required")
	if !strings.Contains(r.stderr, scope) || !strings.Contains(r.stderr, "control was not taken") {
		t.Fatalf("the refusal does not name the scope %s and that control was not taken: %q", scope, r.stderr)
	}
	if st := readStatus(t, bin, id); st.Generation == nil || *st.Generation != gen {
		t.Fatalf("a stop refused confirmation-required moved the generation from %d: %+v", gen, st.Generation)
	}
	// On a terminal it shows the scope and its processes and asks; n
	// declines. script(1) gives the verb a real pty.
	tty := exec.Command("script", "-qec", bin+" stop --take "+id, "/dev/null")
	tty.Stdin = strings.NewReader("n\n")
	r = runCmd(t, tty)
	if r.code != 2 || !strings.Contains(r.stdout, scope) || !strings.Contains(r.stdout, " pi)") ||
		!strings.Contains(r.stdout, "Confirm force-stop? [y/N]") || !strings.Contains(r.stdout, "mosaicctl: declined: ") {
		t.Fatalf("stop on a terminal answered n: exit %d, terminal %q; want the scope, its processes, the question and declined", r.code, r.stdout)
	}
	if st := readStatus(t, bin, id); st.Scope == nil || st.Scope.ActiveState != "active" {
		t.Fatalf("a refused stop changed the engine: %+v", st.Scope)
	}

	proof := filepath.Join(t.TempDir(), "proof.json")
	r = run(t, bin, "stop", id, "--take", "--yes", "--json", "--proof", proof)
	if r.code != 0 {
		t.Fatalf("stop --yes: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	recs := jsonLines(t, r.stdout)
	if lastRecord(recs, "receipt")["state"] != "stopped" || lastRecord(recs, "stop")["state"] != "stopped" || lastRecord(recs, "stop")["proof"] == nil {
		t.Fatalf("stop --json: want a stopped receipt and a stop record with its proof, got\n%s", r.stdout)
	}
	if out := mustRun(t, bin, "proof", "verify", proof); !strings.Contains(out, "verified: all") {
		t.Fatalf("proof verify of the saved proof said %q", out)
	}

	st = readStatus(t, bin, id)
	if st.Claim == nil || st.Claim.State != "stopped" || !st.Claim.Proven || st.Scope == nil || st.Scope.ActiveState == "active" ||
		st.Binding == nil || st.Binding.State != "stopped" || st.LastStop == "" || *st.Generation <= gen {
		t.Fatalf("status after the stop: %+v", st)
	}

	// Admission is closed: a takeover refuses fenced, and nothing is sent.
	wantRefusal(t, run(t, bin, "prompt", "--take", id, "hello?"), "fenced")
	if r := run(t, bin, "recover", "--take", id); r.code != 0 || !strings.Contains(r.stdout, "launched: execution ") {
		t.Fatalf("recover --take: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	// `--` ends the flags: a prompt may start with a dash.
	if r := run(t, bin, "prompt", id, "--take", "--", "--again"); r.code != 0 || r.stdout != "Plain answer to: --again\n" {
		t.Fatalf("prompt ID --take -- --again after recover: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}

	table := mustRun(t, bin, "status")
	row := ""
	for _, l := range strings.Split(table, "\n") {
		if strings.HasPrefix(l, id) {
			row = l
		}
	}
	if f := strings.Fields(row); !strings.HasPrefix(table, "ID ") || len(f) < 8 || f[1] != "active" || f[2] != "active" || !strings.Contains(row, " active/idle ") {
		t.Fatalf("status table row %q; want the socket, the controller and the engine active:\n%s", row, table)
	}
}

// readStatus runs `mosaicctl status ID --json` and decodes its one line.
func readStatus(t *testing.T, bin, id string) convStatus {
	t.Helper()
	var st convStatus
	out := mustRun(t, bin, "status", id, "--json")
	if err := json.Unmarshal([]byte(out), &st); err != nil || st.Conversation != id {
		t.Fatalf("status --json %s: %q (%v)", id, out, err)
	}
	return st
}

// wantRefusal checks a refusal: exit 2, the code first on stderr.
func wantRefusal(t *testing.T, r result, code string) {
	t.Helper()
	if r.code != 2 || !strings.HasPrefix(r.stderr, "mosaicctl: "+code+": ") {
		t.Fatalf("exit %d, stdout %q, stderr %q; want refusal %s (exit 2)", r.code, r.stdout, r.stderr, code)
	}
}

// jsonLines decodes JSON lines.
func jsonLines(t *testing.T, out string) []map[string]any {
	t.Helper()
	var recs []map[string]any
	sc := bufio.NewScanner(strings.NewReader(out))
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("--json line %q: %v", sc.Text(), err)
		}
		recs = append(recs, m)
	}
	return recs
}

// lastRecord returns the last record of kind, or nil.
func lastRecord(recs []map[string]any, kind string) map[string]any {
	var m map[string]any
	for _, r := range recs {
		if r["record"] == kind {
			m = r
		}
	}
	return m
}

// TestAnswerFollowsItsTurn checks which events the prompt verb prints and
// how it ends, on a tape fed by hand: the turn the prompt started, after
// a turn that ran before the item was dispatched (events up to the
// receipt's afterSeq), and every way it can fail to settle.
func TestAnswerFollowsItsTurn(t *testing.T) {
	ev := func(kind protocol.EventKind, role, text, stopReason string) client.Update {
		e := &protocol.Event{Record: "event", Kind: kind, Execution: "e-1", Role: role, StopReason: stopReason}
		if text != "" {
			e.Content = []protocol.Block{{Type: "text", Text: text}, {Type: "toolCall", ToolName: "bash"}}
		}
		return client.Update{Record: "event", Event: e}
	}
	said := func(text string) client.Update { return ev(protocol.EventMessageEnd, "assistant", text, "stop") }
	settled := ev(protocol.EventRunSettled, "", "", "")
	user := ev(protocol.EventMessageEnd, "user", "the prompt", "")
	other := client.Update{Record: "event", Event: &protocol.Event{Kind: protocol.EventMessageEnd, Execution: "e-0",
		Role: "assistant", Content: []protocol.Block{{Type: "text", Text: "late"}}}}
	stop := client.Update{Record: "stop", Stop: &protocol.Stop{ID: "s-1", Kind: "interrupt", Execution: "e-1", State: "reconciled"}}
	stopping := client.Update{Record: "binding", Binding: &protocol.Binding{State: protocol.BindingStopping, Execution: "e-1"}}
	lost := client.Update{Record: "notice", Notice: &protocol.Notice{Kind: protocol.NoticeLostPlace}}

	for _, tc := range []struct {
		name   string
		after  uint64
		tape   []client.Update
		ended  bool
		out    string
		status int // 0: nil error
		code   string
	}{
		{name: "its turn", tape: []client.Update{user, said("Looking."), said(""), said("Done.\n"), settled}, out: "Looking.\nDone.\n"},
		{name: "a turn before the item settles first", after: 2,
			tape: []client.Update{said("old"), settled, other, user, said("new"), settled}, out: "new\n"},
		{name: "interrupted", tape: []client.Update{user, said("part"), stop, settled}, out: "part\n",
			status: exitUnsettled, code: "interrupted"},
		{name: "aborted", tape: []client.Update{user, ev(protocol.EventMessageEnd, "assistant", "", "aborted"), settled},
			status: exitUnsettled, code: "aborted"},
		{name: "force stopped", tape: []client.Update{user, stopping}, status: exitUnsettled, code: "stopped"},
		{name: "lost place", tape: []client.Update{user, lost}, status: exitUnknown, code: codeOutcomeUnknown},
		{name: "connection ended", tape: []client.Update{user, said("part")}, ended: true, out: "part\n",
			status: exitUnknown, code: codeOutcomeUnknown},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tp := &tape{wake: make(chan struct{})}
			for i, u := range tc.tape {
				if u.Event != nil { // numbered as the stream numbers them
					e := *u.Event
					e.Seq = uint64(i + 1)
					u.Event = &e
				}
				tp.add(u)
			}
			if tc.ended {
				tp.end()
			}
			var out bytes.Buffer
			s := &session{id: "pi-0", tape: tp, out: &out}
			err := s.answer(t.Context(), 0, &protocol.Receipt{ID: "rc-1", Execution: "e-1", AfterSeq: tc.after})
			if out.String() != tc.out {
				t.Errorf("printed %q, want %q", out.String(), tc.out)
			}
			var v *verdict
			switch {
			case tc.status == 0 && err != nil:
				t.Fatalf("answer: %v, want nil", err)
			case tc.status != 0 && (!errors.As(err, &v) || v.status != tc.status || v.code != tc.code):
				t.Fatalf("answer: %v, want exit %d with code %s", err, tc.status, tc.code)
			}
		})
	}
}

// TestNoEngineNamesTheFix: a conversation registered where no pi is on
// PATH has no engine; a prompt is refused no-engine, and the client adds
// the conv add line that gives it one, with its own settings.
func TestNoEngineNamesTheFix(t *testing.T) {
	sandboxtest.Require(t)
	bin := sandboxtest.Bin(t, "mosaicctl")
	t.Setenv("PATH", "/usr/bin:/bin") // no pi
	id, proj, _ := startConversation(t, bin, "noengine", "--provider", "fakellm")
	r := run(t, bin, "prompt", id, "--take", "hi")
	wantRefusal(t, r, "no-engine")
	want := "`mosaicctl conv add --engine PATH --replace --project " + proj + " --seat noengine --workspace default --session " +
		filepath.Join(proj, ".pi", "state", "noengine", "sessions", "main.jsonl") + " --provider fakellm`"
	if !strings.Contains(r.stderr, want) {
		t.Fatalf("no-engine refusal %q; want it to name %s", r.stderr, want)
	}
}
