package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mosaic-agents/mosaic/client"
	"github.com/mosaic-agents/mosaic/contrib/piext"
	"github.com/mosaic-agents/mosaic/contrib/sandboxtest"
	"github.com/mosaic-agents/mosaic/contrib/stubmodel"
	"github.com/mosaic-agents/mosaic/protocol"
)

// gateTitle and gateLabels are what contrib/piext/gate.ts raises.
const gateTitle = piext.GateTitle

var gateLabels = piext.GateLabels

// evilExtension would make itself known in every notice stream if Pi
// loaded it: the seal must keep it out.
const evilExtension = `export default function (pi: any) {
  pi.on("tool_call", async (_e: any, ctx: any) => { ctx.ui.notify("EVIL %s loaded", "error"); });
}
`

// gateConversation registers a conversation on the real pinned Pi with
// the reviewed gate extension pinned, and an agent directory whose
// settings.json names another extension and a package that must not load.
func gateConversation(t *testing.T, seat string, script stubmodel.Script) (pc piConversation, ctl, obs *client.Client) {
	t.Helper()
	src, err := os.ReadFile(filepath.Join("..", "..", "contrib", "piext", "gate.ts"))
	if err != nil {
		t.Fatal(err)
	}
	agent, exts := t.TempDir(), t.TempDir()
	gate, pkg := filepath.Join(exts, "gate.ts"), filepath.Join(exts, "evilpkg")
	files := map[string]string{
		gate:                                          string(src),
		filepath.Join(exts, "evil.ts"):                strings.Replace(evilExtension, "%s", "settings", 1),
		filepath.Join(pkg, "extensions/x.ts"):         strings.Replace(evilExtension, "%s", "package", 1),
		filepath.Join(pkg, "package.json"):            `{"name":"evilpkg","version":"1.0.0","pi":{"extensions":["./extensions/x.ts"]}}`,
		filepath.Join(agent, "extensions", "auto.ts"): strings.Replace(evilExtension, "%s", "auto", 1),
		filepath.Join(agent, "settings.json"):         `{"extensions":["` + filepath.Join(exts, "evil.ts") + `"],"packages":["` + pkg + `"]}`,
	}
	for p, body := range files {
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	bin := sandboxtest.Bin(t, "mosaicctl")
	pi, model, stub := sandboxtest.StubPiIn(t, script, agent)
	id, proj, path := startConversation(t, bin, seat, "--engine", pi, "--provider", model.Provider, "--model", model.Model,
		"--agent-dir", model.AgentDir, "--extension", gate)
	pc = piConversation{bin: bin, id: id, proj: proj, path: path, stub: stub}
	// The project is the agent's to write: its own settings.json and
	// extensions must not widen the seal either (the engine starts on
	// the first connection, below).
	for p, body := range map[string]string{
		filepath.Join(proj, ".pi", "settings.json"):         `{"extensions":["` + filepath.Join(exts, "evil.ts") + `"],"packages":["` + pkg + `"]}`,
		filepath.Join(proj, ".pi", "extensions", "proj.ts"): strings.Replace(evilExtension, "%s", "project", 1),
	} {
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ctl, obs = dialE2E(ctx, t, path), dialE2E(ctx, t, path)
	for _, c := range []*client.Client{ctl, obs} {
		if _, err := c.WaitBound(ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Observe(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := ctl.Takeover(ctx); err != nil {
		t.Fatal(err)
	}
	return pc, ctl, obs
}

// approvalIn matches an approval record of form in state.
func approvalIn(form, state string) func(client.Update) bool {
	return func(u client.Update) bool {
		return u.Approval != nil && u.Approval.Form == form && u.Approval.State == state
	}
}

// noticeText matches a notice whose inert detail text starts with prefix.
func noticeText(prefix string) func(client.Update) bool {
	return func(u client.Update) bool {
		if u.Notice == nil || u.Notice.Detail == nil {
			return false
		}
		var d struct{ Text string }
		json.Unmarshal(u.Notice.Detail, &d)
		return strings.HasPrefix(d.Text, prefix)
	}
}

// noEvil fails the test when a sealed-out extension made itself known.
func noEvil(t *testing.T, u client.Update) {
	t.Helper()
	if u.Notice != nil && strings.Contains(string(u.Notice.Detail), "EVIL") {
		t.Fatalf("an extension outside the seal loaded: %s", u.Raw)
	}
}

// TestApprovalsOnRealPi runs P1, P2, P3, P4/H8, P6 and the
// fire-and-forget notices against the pinned Pi with the stub model and
// the reviewed gate extension pinned with --extension, while the user's
// and the project's settings.json name an extension and a package and
// both agent and project directories hold an auto-discovered one: none of
// those loads (the seal).
func TestApprovalsOnRealPi(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	_, ctl, obs := gateConversation(t, "gate", stubmodel.Script{Turns: []stubmodel.Turn{
		{Tool: &stubmodel.ToolCall{Command: "echo GATE_UI; echo GATE_SELECT ran"}}, {Text: []string{"after select"}},
		{Tool: &stubmodel.ToolCall{Command: "echo GATE_CONFIRM ran"}}, {Text: []string{"after confirm"}},
		{Tool: &stubmodel.ToolCall{Command: "echo GATE_TIMEOUT ran"}}, {Text: []string{"after timeout"}},
		{Tool: &stubmodel.ToolCall{Command: "echo GATE_EDITOR ran"}}, {Text: []string{"after editor"}},
	}})
	wait := func(what string, ok func(client.Update) bool) client.Update {
		t.Helper()
		return next(ctx, t, obs, what, func(u client.Update) bool { noEvil(t, u); return ok(u) })
	}
	all := func(what string, oks ...func(client.Update) bool) []client.Update {
		t.Helper()
		checked := make([]func(client.Update) bool, len(oks))
		for i, ok := range oks {
			checked[i] = func(u client.Update) bool { noEvil(t, u); return ok(u) }
		}
		return nextAll(ctx, t, obs, what, checked...)
	}
	settled := func(u client.Update) bool { return u.Event != nil && u.Event.Kind == protocol.EventRunSettled }

	// The fire-and-forget methods, then P2: a select with hostile labels.
	if _, err := ctl.Prompt(ctx, "select"); err != nil {
		t.Fatal(err)
	}
	for _, kind := range []string{protocol.NoticeNotify, protocol.NoticeStatus, protocol.NoticeWidget, protocol.NoticeTitle, protocol.NoticeEditorText} {
		wait("a "+kind+" notice", func(u client.Update) bool { return u.Notice != nil && u.Notice.Kind == kind })
	}
	sel := wait("the select", approvalIn(protocol.FormSelect, protocol.ApprovalPending)).Approval
	if sel.Title != gateTitle || !slices.Equal(sel.Choices, gateLabels) {
		t.Fatalf("select %q %q; want the extension's exact title and labels", sel.Title, sel.Choices)
	}
	if _, err := obs.Approve(ctx, sel.ID, gateLabels[0], ""); protocol.CodeOf(err) != protocol.CodeNotController {
		t.Fatalf("observer's answer: %v, want not-controller", err)
	}
	if _, err := ctl.Approve(ctx, sel.ID, "Allow", ""); protocol.CodeOf(err) != protocol.CodeApprovalChoice {
		t.Fatalf("a label not among the options: %v, want approval-choice", err)
	}
	if res, err := ctl.Approve(ctx, sel.ID, gateLabels[0], sel.Decision); err != nil || res.State != protocol.ApprovalResolved {
		t.Fatalf("answer: %+v, %v", res, err)
	}
	got := all("the result, the tool's end and the settle", noticeText(`RESULT select="Allow <i>once</i>"`),
		func(u client.Update) bool { return u.Event != nil && u.Event.Kind == protocol.EventToolEnd }, settled)
	if !strings.Contains(string(got[1].Event.Tool.Result), "GATE_SELECT ran") {
		t.Fatalf("the allowed tool did not run: %s", got[1].Event.Tool.Result)
	}

	// P1: a confirm answered false blocks the tool.
	if _, err := ctl.Prompt(ctx, "confirm"); err != nil {
		t.Fatal(err)
	}
	cf := wait("the confirm", approvalIn(protocol.FormConfirm, protocol.ApprovalPending)).Approval
	if _, err := ctl.Approve(ctx, cf.ID, "false", ""); err != nil {
		t.Fatal(err)
	}
	all("the result and the settle", noticeText("RESULT confirm=false"), settled)

	// P4/H8: the native timeout passes; the late answer refuses; the
	// extension got Pi's default; the run's settle resolves it natively.
	if _, err := ctl.Prompt(ctx, "timeout"); err != nil {
		t.Fatal(err)
	}
	tm := wait("the timed confirm", approvalIn(protocol.FormConfirm, protocol.ApprovalPending)).Approval
	if tm.Deadline == "" {
		t.Fatalf("timed confirm %+v has no deadline", tm)
	}
	wait("uncertain after the deadline", approvalIn(protocol.FormConfirm, protocol.ApprovalUncertain))
	if _, err := ctl.Approve(ctx, tm.ID, "true", ""); protocol.CodeOf(err) != protocol.CodeApprovalClosed {
		t.Fatalf("late answer: %v, want approval-closed", err)
	}
	all("the result and the native resolution", noticeText("RESULT timeout=false"),
		approvalIn(protocol.FormConfirm, protocol.ApprovalResolvedNatively), settled)

	// P3 and P6: an editor is disabled; an interrupt makes it uncertain,
	// cancels it after the abort (Pi's abort waits for it), and records
	// that on the stop.
	if _, err := ctl.Prompt(ctx, "editor"); err != nil {
		t.Fatal(err)
	}
	ed := wait("the editor", approvalIn(protocol.FormEditor, protocol.ApprovalDisabled)).Approval
	if len(ed.Choices) != 0 || ed.Reason == "" {
		t.Fatalf("editor approval %+v", ed)
	}
	rc, err := ctl.Interrupt(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if rc.State != protocol.ReceiptReconciled {
		t.Fatalf("interrupt receipt %+v", rc)
	}
	got = all("uncertain, the result and the stop", approvalIn(protocol.FormEditor, protocol.ApprovalUncertain), noticeText("RESULT editor=null"),
		func(u client.Update) bool {
			return u.Stop != nil && u.Stop.ID == rc.Stop && u.Stop.State == protocol.StopReconciled
		})
	if st := got[2].Stop; !slices.Contains(st.CancelledDialogs, ed.Decision) {
		t.Fatalf("stop %+v does not record the cancelled editor %s", got[2].Stop, ed.Decision)
	}
}

// TestApproveVerb: `mosaicctl status` says the turn is
// waiting-for-approval; `mosaicctl approve ID` lists the pending select with
// its labels escaped (a newline or bidi control is shown, never laid
// out); `approve --take ID --choice LABEL` answers it through the current
// projection, and the extension receives exactly that label.
func TestApproveVerb(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	pc, ctl, obs := gateConversation(t, "approve", stubmodel.Script{Turns: []stubmodel.Turn{
		{Tool: &stubmodel.ToolCall{Command: "echo GATE_SELECT ran"}}, {Text: []string{"after select"}},
	}})
	if _, err := ctl.Prompt(ctx, "select"); err != nil {
		t.Fatal(err)
	}
	sel := next(ctx, t, obs, "the select", approvalIn(protocol.FormSelect, protocol.ApprovalPending)).Approval
	if st := mustRun(t, pc.bin, "status", pc.id); !strings.Contains(st, protocol.EngineWaitingForApproval) {
		t.Fatalf("status does not say the turn waits for an approval:\n%s", st)
	}
	list := mustRun(t, pc.bin, "approve", pc.id)
	for _, want := range []string{sel.ID, "choice 4: multi^Jline", "<U+202E>gnp.exe<U+202C> (RLO label)", "^[[1mbold^[[0m"} {
		if !strings.Contains(list, want) {
			t.Fatalf("approve list lacks %q:\n%s", want, list)
		}
	}
	if strings.ContainsAny(list, "\u202e\u001b") {
		t.Fatalf("approve list writes raw controls:\n%q", list)
	}
	if r := run(t, pc.bin, "approve", "--take", pc.id, "--choice", "Allow"); r.code != 2 || !strings.Contains(r.stderr, protocol.CodeApprovalChoice) {
		t.Fatalf("a label not among the options: exit %d, %s", r.code, r.stderr)
	}
	out := mustRun(t, pc.bin, "approve", "--take", pc.id, sel.Decision, "--choice", gateLabels[2])
	if !strings.Contains(out, "resolved") {
		t.Fatalf("approve said %q", out)
	}
	next(ctx, t, obs, "the extension's result", noticeText("RESULT select=\"\u202egnp.exe\u202c (RLO label)\""))
}

// TestApprovalToolAbortOnRealPi (P6): the gate's own tool raises a confirm
// without passing the tool's signal, the case where pinned Pi's abort
// waits until the dialog is answered. An interrupt leaves the approval
// uncertain (never denied by mosaic), cancels the dialog right after its
// abort so the abort completes, records that on the stop, and the
// extension sees Pi's cancel value (false).
func TestApprovalToolAbortOnRealPi(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	_, ctl, obs := gateConversation(t, "ask", stubmodel.Script{Turns: []stubmodel.Turn{
		{Tool: &stubmodel.ToolCall{Name: "mosaic_ask", Args: json.RawMessage(`{"question":"Deploy <b>now</b>?\nsure"}`)}},
		{Text: []string{"after ask"}},
	}})
	if _, err := ctl.Prompt(ctx, "ask"); err != nil {
		t.Fatal(err)
	}
	ask := next(ctx, t, obs, "the tool's confirm", approvalIn(protocol.FormConfirm, protocol.ApprovalPending)).Approval
	if ask.Title != "mosaic_ask" || ask.Message != "Deploy <b>now</b>?\nsure" {
		t.Fatalf("the tool's confirm %+v", ask)
	}
	rc, err := ctl.Interrupt(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if rc.State != protocol.ReceiptReconciled {
		t.Fatalf("interrupt receipt %+v", rc)
	}
	got := nextAll(ctx, t, obs, "uncertain, the result and the stop",
		func(u client.Update) bool {
			return u.Approval != nil && u.Approval.Decision == ask.Decision && u.Approval.State != protocol.ApprovalPending
		},
		noticeText("RESULT ask=false"),
		func(u client.Update) bool {
			return u.Stop != nil && u.Stop.ID == rc.Stop && u.Stop.State == protocol.StopReconciled
		})
	if a := got[0].Approval; a.State != protocol.ApprovalUncertain || a.Chosen != "" || a.ResolvedBy != nil {
		t.Fatalf("after the interrupt the approval is %+v; want uncertain, nobody chose", a)
	}
	if st := got[2].Stop; !slices.Contains(st.CancelledDialogs, ask.Decision) {
		t.Fatalf("stop %+v does not record the cancelled confirm", st)
	}
}

// nextAll reads c's updates until each predicate matched one, in any
// order (broadcasts and events travel on different queues of a
// connection), and returns the matches in the predicates' order.
func nextAll(ctx context.Context, t *testing.T, c *client.Client, what string, oks ...func(client.Update) bool) []client.Update {
	t.Helper()
	got := make([]client.Update, len(oks))
	left := len(oks)
	next(ctx, t, c, what, func(u client.Update) bool {
		for i, ok := range oks {
			if got[i].Raw == nil && ok(u) {
				got[i], left = u, left-1
				break
			}
		}
		return left == 0
	})
	return got
}
