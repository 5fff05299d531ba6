package web_test

import (
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"testing"
)

// TestBrowserNoCommandBeforeBinding (Chromium, a scripted stream): until
// the state the page shows is bound to an execution, no button and no
// send posts a command: a generation and execution the page does not
// know yet would address a command to whatever the controller runs.
func TestBrowserNoCommandBeforeBinding(t *testing.T) {
	f := startFakeConv(t)
	p := f.open(t)
	unbound := boundState("observer")
	unbound["bound"], unbound["generation"], unbound["execution"] = false, 0, ""
	f.emit("state", unbound)
	p.soon("the unbound view", textHas("#status", "execution -"))
	for _, sel := range []string{"#take", "#interrupt", "#send", "#stop", "#recover"} {
		t.Run(sel, func(t *testing.T) {
			p := p.on(t)
			p.set("#text", "hello")
			p.click(sel)
			p.soon("the page saying it waits", textHas("#notice", "not bound yet"))
			if ops := f.commands(); len(ops) != 0 {
				t.Fatalf("the page posted %q before its view was bound", ops)
			}
		})
	}
	f.emit("state", boundState("observer"))
	p.soon("the bound view", textHas("#status", "execution x-1"))
	p.click("#take")
	for range 50 {
		if slices.Contains(f.commands(), "takeover") {
			return
		}
		eval[bool](p, `new Promise((r) => setTimeout(() => r(true), 100))`)
	}
	t.Fatalf("the bound page posted no takeover: %q", f.commands())
}

// TestBrowserRecordsBounded (Chromium, a scripted stream): an engine
// makes as many records as it likes (an extension's status updates, each
// a notice); the page keeps the newest and says how many it let go, so
// the tab's DOM does not grow with them.
func TestBrowserRecordsBounded(t *testing.T) {
	const n = 700
	p := openFlooded(t, "observer", n, func(i int) (string, any) {
		return "record", map[string]any{"record": "notice", "kind": "status", "message": "update " + strconv.Itoa(i), "line": "status: update " + strconv.Itoa(i)}
	})
	p.soon("the last record", textHas("#records", fmt.Sprintf("update %d", n-1)))
	kept := eval[int](p, `document.querySelectorAll("#records > .rec:not(.dropped)").length`)
	if kept > 200 {
		t.Errorf("the page holds %d of %d records, want at most 200", kept, n)
	}
	p.soon("the count of records let go", textHas("#records .dropped", fmt.Sprintf("%d earlier records", n-kept)))
}

// TestBrowserForceStopOutcomeLost (Chromium, a scripted command
// endpoint): when the force stop's answer is lost (the connection
// dropped, or the server could not tell), the dialog says the outcome is
// unknown and how to learn it: never silence, never success.
func TestBrowserForceStopOutcomeLost(t *testing.T) {
	for _, tc := range []struct {
		name string
		lose func(w http.ResponseWriter)
	}{
		{"connection dropped", func(w http.ResponseWriter) {
			c, _, err := http.NewResponseController(w).Hijack()
			if err == nil {
				c.Close()
			}
		}},
		{"server says unknown", func(w http.ResponseWriter) { fmt.Fprint(w, `{"unknown":"the connection ended before the reply"}`) }},
		{"server error", func(w http.ResponseWriter) { fmt.Fprint(w, `{"error":"context deadline exceeded"}`) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := startFakeConv(t)
			f.reply = func(w http.ResponseWriter, op string) {
				switch op {
				case "issue-confirmation":
					fmt.Fprint(w, `{"reply":{"id":"cf-1","intent":"force stop execution x-1","execution":"x-1","generation":3,"expires":"soon"}}`)
				case "force-stop":
					tc.lose(w)
				default:
					fmt.Fprint(w, `{"reply":{"record":"confirmation"}}`)
				}
			}
			p := f.open(t)
			f.emit("state", boundState("controller"))
			p.soon("control", textHas("#mode", "controller"))
			p.click("#stop")
			p.soon("the confirmation", `document.querySelector("#confirm").open`)
			p.click("#confirm-yes")
			p.soon("the unknown outcome in the dialog", textHas("#confirm-result", "outcome unknown")+" && "+textHas("#confirm-result", "mosaicctl status "+fakeID))
		})
	}
}

// TestBrowserApprovalsChange (Chromium, a scripted stream): approvals
// arrive as a change (the order, and the items that changed), and the
// page keeps what did not change.
func TestBrowserApprovalsChange(t *testing.T) {
	f := startFakeConv(t)
	p := f.open(t)
	f.emit("state", boundState("controller"))
	ap := func(id, state string) map[string]any {
		return map[string]any{"record": "approval", "id": id, "decision": "d-" + id, "execution": "x-1", "generation": 3, "controller": "k-1",
			"form": "confirm", "title": "title " + id, "choices": []string{"true", "false"}, "state": state}
	}
	f.emit("approvals", map[string]any{"order": []string{"a1", "a2"}, "set": map[string]any{"a1": ap("p1", "pending"), "a2": ap("p2", "pending")}})
	p.soon("two open approvals", `document.querySelectorAll("#approvals .approval").length === 2`)
	f.emit("approvals", map[string]any{"order": []string{"a1", "a2"}, "set": map[string]any{"a2": ap("p2", "resolved")}})
	p.soon("p2 settled, p1 still open", `document.querySelectorAll("#approvals .approval").length === 1 && `+
		textHas("#approvals", "title p1")+" && "+textHas("#approvals-done", "title p2"))
	f.emit("approvals", map[string]any{"order": []string{"a2"}, "set": map[string]any{}})
	p.soon("p1 gone", `document.querySelectorAll("#approvals .approval").length === 0 && `+textHas("#approvals-done", "title p2"))
}

// TestBrowserTranscriptWindow (Chromium, a scripted stream): the stream
// sends the newest items only (from), and the page lets go of those
// before them and says so, so an engine's endless output does not grow
// the tab's DOM.
func TestBrowserTranscriptWindow(t *testing.T) {
	f := startFakeConv(t)
	p := f.open(t)
	f.emit("state", boundState("observer"))
	item := func(i int) map[string]any {
		return map[string]any{"kind": "message", "role": "assistant", "lines": []string{"assistant", "line " + strconv.Itoa(i)}}
	}
	set := func(from, to int) map[string]any {
		s := map[string]any{}
		for i := from; i < to; i++ {
			s[strconv.Itoa(i)] = item(i)
		}
		return s
	}
	f.emit("items", map[string]any{"n": 3, "from": 0, "set": set(0, 3)})
	p.soon("three items", `document.querySelectorAll("#transcript li.item").length === 3`)
	f.emit("items", map[string]any{"n": 1003, "from": 3, "set": set(3, 1003)})
	p.soon("the newest item", textHas("#transcript", "line 1002"))
	if n := eval[int](p, `document.querySelectorAll("#transcript li.item").length`); n != 1000 {
		t.Errorf("the page shows %d items, want the 1000 the stream holds", n)
	}
	p.soon("the window marker", textHas("#transcript", "3 earlier items are not shown"))
	if eval[bool](p, `Array.from(document.querySelectorAll("#transcript li.item")).some(li => li.textContent.endsWith("line 0"))`) {
		t.Errorf("the page still shows an item before the window")
	}
}

// TestBrowserNotifiedBounded (Chromium, a scripted stream): an engine
// opens dialog after dialog (a confirm with a 1 ms timeout in a loop, each
// a new decision); the page remembers which it notified of only for the
// decisions the tab still holds, so its memory does not grow with them.
func TestBrowserNotifiedBounded(t *testing.T) {
	const n = 500
	p := openFlooded(t, "controller", n, func(i int) (string, any) {
		key, id := fmt.Sprint("a", i), fmt.Sprint("p", i)
		return "approvals", map[string]any{"order": []string{key}, "set": map[string]any{key: map[string]any{
			"record": "approval", "id": id, "decision": "d-" + id, "execution": "x-1", "generation": 3, "controller": "k-1",
			"form": "confirm", "title": "title " + id, "choices": []string{"true", "false"}, "state": "pending"}}}
	})
	p.soon("the last dialog", textHas("#approvals", fmt.Sprint("title p", n-1)))
	if got := eval[int](p, `window.mosaicHeld().notified`); got > 1 {
		t.Errorf("the page remembers %d notified decisions after %d came and went, want only the one it holds", got, n)
	}
}
