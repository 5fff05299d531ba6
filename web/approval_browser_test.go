package web_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/mosaic-agents/mosaic/contrib/piext"
	"github.com/mosaic-agents/mosaic/contrib/sandboxtest"
	"github.com/mosaic-agents/mosaic/contrib/stubmodel"
	"github.com/mosaic-agents/mosaic/terminal"
)

// gateExtension writes the reviewed fixture extension where the engine
// may read it, for `conv add --extension`.
func gateExtension(t *testing.T) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "gate.ts")
	if err := os.WriteFile(p, piext.Gate, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestBrowserApproval answers a native select of the real Pi (the gate
// extension, pinned) in Debian's Chromium: both tabs show the pending
// approval with its exact title and labels made inert; the observer's
// buttons are disabled and, forced, its answer is refused not-controller
// and the refusal shown; the list shows the waiting; a reloaded observer
// gets the approval from its observe; the controller answers with the
// exact label (the extension lets the tool run only for it); both tabs
// show who decided; a second, different answer is refused
// approval-conflict and the same one again returns the resolution.
func TestBrowserApproval(t *testing.T) {
	sandboxtest.Require(t)
	id := convPi(t, "webgate", stubmodel.Script{Turns: []stubmodel.Turn{
		{Tool: &stubmodel.ToolCall{Command: "echo GATE_SELECT $((6*7))-ran"}},
		{Text: []string{"after the gate"}},
		{Tool: &stubmodel.ToolCall{Command: "echo GATE_CONFIRM $((6*7))-ran"}},
		{Text: []string{"after the confirm"}},
		{Tool: &stubmodel.ToolCall{Command: "echo GATE_SELECT again"}},
		{Text: []string{"after the second select"}},
	}}, "--extension", gateExtension(t))
	s, a, o := twoTabs(t, id)
	conv := s.base + "/c/" + id
	a.set("#text", "run the gated tool")
	a.click("#send")

	const pending = `document.querySelector('#approvals .approval[data-state="pending"]')`
	wantLabels := make([]string, len(piext.GateLabels))
	for i, l := range piext.GateLabels {
		wantLabels[i] = terminal.SanitizeLine(l)
	}
	type shown struct {
		ID       string   `json:"id"`
		Title    string   `json:"title"`
		Labels   []string `json:"labels"`
		Disabled []bool   `json:"disabled"`
		Who      string   `json:"who"`
		Markup   int      `json:"markup"`
		Raw      bool     `json:"raw"`
	}
	look := func(p *page) shown {
		t.Helper()
		p.until("the pending approval", pending+` && `+pending+`.querySelectorAll("button.choice").length === 5`)
		return eval[shown](p, `(() => { const a = `+pending+`, bs = Array.from(a.querySelectorAll("button.choice"));
			return {id: a.dataset.approval, title: a.querySelector(".approval-title").textContent,
				labels: bs.map(b => b.textContent), disabled: bs.map(b => b.disabled),
				who: a.querySelector(".approval-who").textContent,
				markup: document.querySelectorAll("#approvals b, #approvals i, #approvals script, #approvals a, #approvals-done b, #approvals-done i, #approvals-done script, #approvals-done a").length,
				raw: /[\u001b\u202e\u202c\u2028]/.test(document.body.textContent)}; })()`)
	}
	inert := func(p *page, v shown) {
		t.Helper()
		if v.Title != terminal.SanitizeLine(piext.GateTitle) {
			t.Errorf("%s: the approval's title is %q, want the gate's title made inert %q", p.who, v.Title, terminal.SanitizeLine(piext.GateTitle))
		}
		if !slices.Equal(v.Labels, wantLabels) {
			t.Errorf("%s: the choices read %q, want the exact labels made inert %q", p.who, v.Labels, wantLabels)
		}
		if v.Markup != 0 || v.Raw {
			t.Errorf("%s: the approval's text became markup (%d elements) or reached the page raw (%v)", p.who, v.Markup, v.Raw)
		}
	}

	var ap shown
	t.Run("the observer sees it read-only", func(t *testing.T) {
		o := o.on(t)
		v := look(o)
		inert(o, v)
		if slices.Contains(v.Disabled, false) || !strings.Contains(v.Who, "read-only: only the controller") {
			t.Errorf("B (observer): buttons disabled %v, %q: want every one disabled and read-only", v.Disabled, v.Who)
		}
		// Forced past the disabled button, the answer reaches the
		// controller and is refused there; the page shows the refusal.
		eval[bool](o, `(() => { const b = `+pending+`.querySelector("button.choice"); b.disabled = false; b.click(); return true; })()`)
		o.until("the observer's refusal", textHas("#approvals-result", "refused not-controller:"))
		o.until("the approval still pending", pending+` !== null`)
	})

	t.Run("the controller may answer", func(t *testing.T) {
		a := a.on(t)
		ap = look(a)
		inert(a, ap)
		if slices.Contains(ap.Disabled, true) || !strings.Contains(ap.Who, "this tab is the controller") {
			t.Errorf("A (controller): buttons disabled %v, %q: want every one enabled", ap.Disabled, ap.Who)
		}
		a.until("the waiting title", `document.title.startsWith("[waiting for approval")`)
	})

	t.Run("the list shows the waiting", func(t *testing.T) {
		o := o.on(t)
		row := fmt.Sprintf(`document.querySelector('tr[data-id=%q]')`, id)
		o.run("open the list", chromedp.Navigate(s.base+"/"))
		o.until("one pending approval in the row", row+` && `+row+`.children[5].textContent === "1 pending" && `+row+`.children[1].textContent.includes("waiting for approval")`)
		// A new tab learns of the open decision from its observe.
		o.run("open the conversation again", chromedp.Navigate(conv))
		v := look(o)
		inert(o, v)
		if v.ID != ap.ID || slices.Contains(v.Disabled, false) {
			t.Errorf("B after a reload: approval %s, disabled %v: want %s, read-only", v.ID, v.Disabled, ap.ID)
		}
	})

	approvalShots(t, o)

	a.click(`#approvals button.choice[data-index="0"]`)
	a.until("the answer", textHas("#approvals-result", `answered "Allow <i>once</i>"`))
	conn := eval[string](a, `mosaicState().connection`)
	for _, p := range []*page{a, o} {
		done := fmt.Sprintf(`document.querySelector('#approvals-done .approval[data-approval=%q][data-state="resolved"]')`, ap.ID)
		p.until("the resolution and who decided", done+` && `+done+`.querySelector(".approval-who").textContent.startsWith(`+
			jsString(`answered "Allow <i>once</i>" by connection `+conn)+`) && document.querySelector("#approvals").hidden`)
		// The extension lets the tool run only for its exact first label.
		p.until("the gated tool's output", textHas("#transcript", "GATE_SELECT 42-ran")+` && `+textHas("#transcript", "after the gate"))
		if r := eval[bool](p, `/[\u001b\u202e\u202c\u2028]/.test(document.body.textContent) || document.querySelectorAll("#approvals-done b, #approvals-done i, #approvals-done script").length > 0`); r {
			t.Errorf("%s: the resolved approval reached the page as markup or raw controls", p.who)
		}
	}

	t.Run("a second answer", func(t *testing.T) {
		a := a.on(t)
		post := func(choice int) string {
			return eval[string](a, fmt.Sprintf(`mosaic.post("/api/c/%s/command", {tab: mosaicState().tab, op: "approval", approval: %q, choice: %d,
				generation: mosaicState().generation, execution: mosaicState().execution}).then(j => j.refusal ? j.refusal.code : j.reply.state + " " + j.reply.chosen)`, id, ap.ID, choice))
		}
		if got := post(1); got != "approval-conflict" {
			t.Errorf("another choice after the answer: %q, want approval-conflict", got)
		}
		if got := post(0); got != "resolved Allow <i>once</i>" {
			t.Errorf("the same choice again: %q, want the resolution again (nothing sent)", got)
		}
		if got := post(7); got != "approval-choice" {
			t.Errorf("a choice index the approval does not have: %q, want approval-choice", got)
		}
		for _, c := range []struct{ body, want string }{
			{fmt.Sprintf(`{approval: %q}`, ap.ID), "malformed"},
			{`{approval: "ap-not-shown", choice: 0}`, "approval-unknown"},
		} {
			got := eval[string](a, fmt.Sprintf(`mosaic.post("/api/c/%s/command", Object.assign({tab: mosaicState().tab, op: "approval",
				generation: mosaicState().generation}, %s)).then(j => j.refusal ? j.refusal.code : "accepted")`, id, c.body))
			if got != c.want {
				t.Errorf("an answer %s: %q, want %s", c.body, got, c.want)
			}
		}
	})

	// A confirm, then control moves while it is pending: the decision is
	// projected again for the new controller, the old view is refused.
	a.set("#text", "confirm it")
	a.click("#send")
	for _, p := range []*page{a, o} {
		p.until("the pending confirm", pending+` && `+pending+`.querySelectorAll("button.choice").length === 2`)
	}
	old := eval[string](a, pending+`.dataset.approval`)
	o.click("#take")
	o.until("B in control", `document.querySelector("#mode").textContent === "controller"`)
	a.until("A an observer", `document.querySelector("#mode").textContent === "observer"`)
	curCSS := fmt.Sprintf(`#approvals .approval[data-state="pending"]:not([data-approval=%q])`, old)
	cur := fmt.Sprintf(`document.querySelector(%s)`, jsString(curCSS))
	o.until("the confirm projected for B, answerable", cur+` && !`+cur+`.querySelector("button.choice").disabled`)
	a.until("the confirm read-only in A", cur+` && `+cur+`.querySelector("button.choice").disabled`)

	t.Run("a stale view's answer is refused", func(t *testing.T) {
		a, o := a.on(t), o.on(t)
		post := func(p *page, id string, gen string) string {
			return eval[string](p, fmt.Sprintf(`mosaic.post("/api/c/%s/command", {tab: mosaicState().tab, op: "approval", approval: %q, choice: 0,
				generation: %s, execution: mosaicState().execution}).then(j => j.refusal ? j.refusal.code : j.reply.state)`, id, old, gen))
		}
		// A answers what it showed before B's takeover.
		if got := post(a, id, "mosaicState().generation - 1"); got != "revoked" {
			t.Errorf("A's answer on its view before the takeover: %q, want revoked", got)
		}
		// B answers the projection it saw as an observer.
		if got := post(o, id, "mosaicState().generation"); got != "approval-superseded" {
			t.Errorf("B's answer to the superseded projection: %q, want approval-superseded", got)
		}
	})

	o.click(curCSS + ` button.choice[data-index="1"]`)
	o.until("the answer false", textHas("#approvals-result", `answered "false"`))
	bconn := eval[string](o, `mosaicState().connection`)
	for _, p := range []*page{a, o} {
		p.until("the confirm resolved by B", `Array.from(document.querySelectorAll('#approvals-done .approval[data-state="resolved"] .approval-who')).some(w => w.textContent.startsWith(`+
			jsString(`answered "false" by connection `+bconn)+`))`)
		p.until("the turn after the blocked tool", textHas("#transcript", "after the confirm"))
	}
	if got := eval[string](a, `document.querySelector("#transcript").textContent`); strings.Contains(got, "GATE_CONFIRM 42-ran") {
		t.Errorf("the confirm answered false, yet the gated command ran")
	}

	t.Run("a label with a line break is answered byte for byte", func(t *testing.T) {
		o := o.on(t)
		// The controller takes only the engine's exact bytes: a label
		// sent as the page shows it (multi^Jline) would be refused
		// approval-choice.
		o.set("#text", "select again")
		o.click("#send")
		o.until("the second select, answerable", pending+` && `+pending+`.querySelectorAll("button.choice").length === 5 && !`+pending+`.querySelector("button.choice").disabled`)
		o.click(`#approvals .approval[data-state="pending"] button.choice[data-index="3"]`)
		o.until("the answer multi^Jline", textHas("#approvals-result", `answered "multi^Jline"`))
		o.until("the turn after it", textHas("#transcript", "after the second select"))
	})
}

func jsString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// approvalShots writes the screenshots of the approval panel of docs/web.md
// when MOSAIC_WEB_SHOTS names a directory: the observer's read-only view
// of the gate's select at desktop and at phone size.
func approvalShots(t *testing.T, p *page) { panelShots(t, p, "web-approval") }

// panelShots writes p as it is now, at desktop and at phone size, to
// MOSAIC_WEB_SHOTS/name-{desktop,phone}.png when that names a directory.
func panelShots(t *testing.T, p *page, name string) {
	dir := os.Getenv("MOSAIC_WEB_SHOTS")
	if dir == "" {
		return
	}
	for _, size := range []struct {
		name string
		w, h int64
		mob  bool
	}{{"desktop", 1280, 860, false}, {"phone", 390, 844, true}} {
		emu := []chromedp.EmulateViewportOption{chromedp.EmulateScale(1)}
		if size.mob {
			emu = append(emu, chromedp.EmulateMobile)
		}
		p.run("resize", chromedp.EmulateViewport(size.w, size.h, emu...), chromedp.Sleep(time.Second))
		png, err := chromedp.Run(p.ctx, chromedp.CaptureScreenshot())
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name+"-"+size.name+".png"), png, 0o644); err != nil {
			t.Error(err)
		}
	}
	p.run("reset the viewport", chromedp.EmulateReset())
}
