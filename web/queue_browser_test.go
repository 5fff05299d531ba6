package web_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/mosaic-agents/mosaic/contrib/sandboxtest"
	"github.com/mosaic-agents/mosaic/contrib/stubmodel"
	"github.com/mosaic-agents/mosaic/terminal"
)

// TestBrowserQueue drives the queue's chips in Debian's Chromium against
// the real Pi and the stub model: two prompts sent while a turn runs
// show as two chips in both tabs, inert, the observer's buttons disabled
// (and, forced, refused not-controller); the controller edits the second
// inline (both tabs show the new text), a stale revision's edit is
// refused stale-item, the first is cancelled; an interrupt pauses the
// queue (the list shows it, a reopened tab reads it from its observe);
// Resume sends the edited text, which the model receives exactly once,
// and the cancelled text never.
func TestBrowserQueue(t *testing.T) {
	sandboxtest.Require(t)
	id, stub := convPiStub(t, "webqueue", stubmodel.Script{Turns: []stubmodel.Turn{{Endless: true, ChunkDelayMS: 50}}})
	s, a, o := twoTabs(t, id)
	a.set("#text", "start the long turn")
	a.click("#send")
	// The turn streams (the binding's engineState is not republished at
	// a turn's start, so the words are the evidence it runs).
	a.until("the turn streaming", textHas("#transcript", "w3 w4"))

	const (
		first  = "first queued, to be cancelled"
		second = "second <script>window.pwned=5</script><b>bold</b>\nline two \u202Eevil\u202C end"
		edited = "EDITED second: answer me"
	)
	chips := func(n int) string {
		return fmt.Sprintf(`document.querySelectorAll("#queue .chip[data-state=queued]").length === %d`, n)
	}
	for i, text := range []string{first, second} {
		a.set("#text", text)
		a.click("#send")
		a.until(fmt.Sprintf("chip %d", i+1), chips(i+1))
	}
	type chip struct {
		ID       string `json:"id"`
		Revision int    `json:"revision"`
		Text     string `json:"text"`
		Disabled []bool `json:"disabled"`
	}
	read := func(p *page) []chip {
		return eval[[]chip](p, `Array.from(document.querySelectorAll("#queue .chip")).map(c => ({id: c.dataset.item, revision: Number(c.dataset.revision),
			text: (c.querySelector(".chip-text")||{textContent:""}).textContent, disabled: Array.from(c.querySelectorAll("button")).map(b => b.disabled)}))`)
	}
	var shown []chip
	t.Run("two chips in both tabs, inert", func(t *testing.T) {
		a, o := a.on(t), o.on(t)
		for _, p := range []*page{a, o} {
			p.until("two chips", chips(2))
			cs := read(p)
			if len(cs) != 2 || cs[0].Text != first || cs[1].Text != terminal.SanitizeLine(second) {
				t.Fatalf("%s: chips %+v, want %q then %q", p.who, cs, first, terminal.SanitizeLine(second))
			}
			for _, c := range cs {
				want := fmt.Sprint([]bool{p != a, p != a}) // Edit, Cancel
				if fmt.Sprint(c.Disabled) != want {
					t.Errorf("%s: chip %s buttons disabled %v: want enabled for the controller only", p.who, c.ID, c.Disabled)
				}
			}
			bad := eval[bool](p, `window.pwned !== undefined || document.querySelectorAll("#queue script, #queue b, #queue a").length > 0 || /[\u202e\u202c]/.test(document.body.textContent)`)
			if bad {
				t.Errorf("%s: a chip's text became markup or reached the page raw", p.who)
			}
			if p == a {
				shown = cs
			}
		}
		if !strings.Contains(eval[string](o, `document.querySelector("#queue").textContent`), "read-only: only the controller") {
			t.Errorf("B: the observer's chips do not say they are read-only")
		}
	})
	if len(shown) != 2 {
		t.FailNow()
	}

	t.Run("the observer's cancel is refused", func(t *testing.T) {
		o := o.on(t)
		eval[bool](o, fmt.Sprintf(`(() => { const b = document.querySelector('#queue .chip[data-item=%q] button.chip-cancel'); b.disabled = false; b.click(); return true; })()`, shown[0].ID))
		o.until("the refusal", textHas("#queue-result", "refused not-controller:"))
		o.until("both chips still there", chips(2))
	})

	t.Run("edit the second inline", func(t *testing.T) {
		a, o := a.on(t), o.on(t)
		a.click(fmt.Sprintf(`#queue .chip[data-item=%q] button.chip-edit`, shown[1].ID))
		// The editor holds the person's exact text, not the notation.
		if v := eval[string](a, `document.querySelector("#queue textarea.chip-editor").value`); v != second {
			t.Errorf("the inline editor holds %q, want the item's exact text %q", v, second)
		}
		a.set("#queue textarea.chip-editor", edited)
		a.click(fmt.Sprintf(`#queue .chip[data-item=%q] button.chip-save`, shown[1].ID))
		for _, p := range []*page{a, o} {
			p.until("the edited text in the chip", fmt.Sprintf(`(() => { const c = document.querySelector('#queue .chip[data-item=%q] .chip-text'); return !!c && c.textContent === %q; })()`, shown[1].ID, edited))
		}
		// A view of the item before the edit: compare-and-set refuses it.
		code := eval[string](a, fmt.Sprintf(`mosaic.post("/api/c/%s/command", {tab: mosaicState().tab, op: "edit-queued", item: %q, revision: %d, text: "from a stale view",
			generation: mosaicState().generation, execution: mosaicState().execution}).then(j => j.refusal ? j.refusal.code : "accepted")`, id, shown[1].ID, shown[1].Revision))
		if code != "stale-item" {
			t.Errorf("an edit naming the revision before the edit: %q, want stale-item", code)
		}
		if got := read(a); len(got) != 2 || got[1].Text != edited {
			t.Errorf("after the stale edit the chips are %+v, want the edited text kept", got)
		}
	})

	t.Run("cancel the first", func(t *testing.T) {
		a, o := a.on(t), o.on(t)
		a.click(fmt.Sprintf(`#queue .chip[data-item=%q] button.chip-cancel`, shown[0].ID))
		for _, p := range []*page{a, o} {
			p.until("one chip left", chips(1)+fmt.Sprintf(` && !document.querySelector('#queue .chip[data-item=%q]')`, shown[0].ID))
		}
		a.until("the cancel's outcome", textHas("#queue-result", "cancel of "+shown[0].ID+" (queue revision "))
	})

	t.Run("refusals", func(t *testing.T) {
		a := a.on(t)
		post := func(body string) string {
			return eval[string](a, fmt.Sprintf(`mosaic.post("/api/c/%s/command", Object.assign({tab: mosaicState().tab, generation: mosaicState().generation,
				execution: mosaicState().execution}, %s)).then(j => j.refusal ? j.refusal.code : "accepted")`, id, body))
		}
		for _, c := range []struct{ what, body, want string }{
			{"an edit naming no revision", fmt.Sprintf(`{op: "edit-queued", item: %q, text: "x"}`, shown[1].ID), "malformed"},
			{"a cancel naming no item", `{op: "cancel-queued", revision: 1}`, "malformed"},
			{"a cancel of an item no queue has", `{op: "cancel-queued", item: "qi-0000000000000000", revision: 1}`, "unknown-item"},
			{"the cancelled item cancelled again", fmt.Sprintf(`{op: "cancel-queued", item: %q, revision: %d}`, shown[0].ID, shown[0].Revision), "item-dispatched"},
		} {
			if got := post(c.body); got != c.want {
				t.Errorf("%s: %q, want %s", c.what, got, c.want)
			}
		}
	})

	a.click("#interrupt")
	a.until("the interrupt reconciled", textHas("#notice", "interrupt reconciled"))
	const resume = `document.querySelector("#queue .queue-paused button.queue-resume")`
	for _, p := range []*page{a, o} {
		p.until("the queue paused with Resume", resume+` !== null && `+textHas("#queue", "queue paused")+` && `+chips(1)+` && `+textHas("#engine", "idle"))
	}
	if !eval[bool](o, resume+`.disabled`) || eval[bool](a, resume+`.disabled`) {
		t.Errorf("Resume: observer disabled %v, controller disabled %v; want only the observer's disabled",
			eval[bool](o, resume+`.disabled`), eval[bool](a, resume+`.disabled`))
	}

	t.Run("the list and a reopened tab show the pause", func(t *testing.T) {
		o := o.on(t)
		row := fmt.Sprintf(`document.querySelector('tr[data-id=%q]')`, id)
		o.run("open the list", chromedp.Navigate(s.base+"/"))
		o.until("the queue column", row+` && `+row+`.children[6].textContent === "1 waiting · paused"`)
		o.run("open the conversation again", chromedp.Navigate(s.base+"/c/"+id))
		o.until("the paused queue from the observe", resume+` !== null && `+chips(1)+` && `+textHas("#queue .chip-text", edited))
	})

	panelShots(t, a, "web-queue")
	a.click("#queue .queue-resume")
	for _, p := range []*page{a, o} {
		p.until("the edited text answered", textHas("#transcript", "Plain answer to: "+edited)+` && `+chips(0)+
			` && !document.querySelector("#queue .queue-paused") && `+textHas("#engine", "idle"))
	}
	var got, cancelled int
	for _, r := range stub.Requests() {
		switch r.LastUserText {
		case edited:
			got++
		case first, second:
			cancelled++
		}
	}
	if got != 1 || cancelled != 0 {
		t.Errorf("the model received the edited text %d times and the cancelled or replaced texts %d times; want once and never", got, cancelled)
	}
}
