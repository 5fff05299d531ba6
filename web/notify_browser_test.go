package web_test

import (
	"context"
	"testing"
	"time"

	cdpbrowser "github.com/chromedp/cdproto/browser"
	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/chromedp"
	"github.com/mosaic-agents/mosaic/contrib/piext"
	"github.com/mosaic-agents/mosaic/contrib/sandboxtest"
	"github.com/mosaic-agents/mosaic/contrib/stubmodel"
	"github.com/mosaic-agents/mosaic/terminal"
)

// spyNotifications makes the page hidden (as a background tab is) and
// records every Notification the page constructs, through the browser's
// own constructor: a notification is recorded only if the browser
// accepted it (permission granted), with whether it reported it shown.
const spyNotifications = `(() => {
	Object.defineProperty(document, "hidden", {configurable: true, get: () => true});
	window.__notes = [];
	const N = window.Notification;
	window.Notification = class extends N {
		constructor(title, opts) {
			super(title, opts);
			const rec = {title: title, body: (opts || {}).body || "", shown: false, error: false};
			this.addEventListener("show", () => { rec.shown = true; });
			this.addEventListener("error", () => { rec.error = true; });
			window.__notes.push(rec);
		}
	};
	return true;
})()`

type note struct {
	Title string `json:"title"`
	Body  string `json:"body"`
	Shown bool   `json:"shown"`
	Error bool   `json:"error"`
}

// TestBrowserNotification (sandbox, Chromium, the real Pi with the gate
// extension): the notification permission is granted to B's browser
// context through the DevTools protocol (Browser.setPermission), not to
// A's. With both pages hidden, an approval that arrives pending raises
// exactly one notification in B, titled "waiting for an approval" with
// the gate's title made inert, which Chromium reports shown (its "show"
// event), and none in A (no permission); the approval's later updates do
// not raise it again. The page's hidden state is set by the test
// (document.hidden), as a background tab's would be.
func TestBrowserNotification(t *testing.T) {
	sandboxtest.Require(t)
	id := convPi(t, "webnotify", stubmodel.Script{Turns: []stubmodel.Turn{
		{Tool: &stubmodel.ToolCall{Command: "echo GATE_SELECT $((6*7))-ran"}},
		{Text: []string{"after the gate"}},
	}}, "--extension", gateExtension(t))
	s, a, o := twoTabs(t, id)

	c := chromedp.FromContext(o.ctx)
	ctx, cancel := context.WithTimeout(o.ctx, time.Minute)
	defer cancel()
	if _, err := cdp.Call(ctx, c.Browser, cdpbrowser.SetPermission, cdpbrowser.SetPermissionParams{
		Permission: &cdpbrowser.PermissionDescriptor{Name: "notifications"}, Setting: cdpbrowser.PermissionSettingGranted,
		Origin: s.base, BrowserContextID: c.BrowserContextID}); err != nil {
		t.Fatalf("grant B the notification permission: %v", err)
	}
	o.click("#notify")
	o.until("B's permission granted", textHas("#notice", "notifications: granted"))
	if p := eval[string](a, `Notification.permission`); p == "granted" {
		t.Fatalf("A has the notification permission %q without a grant", p)
	}
	for _, p := range []*page{a, o} {
		eval[bool](p, spyNotifications)
	}

	a.set("#text", "run the gated tool")
	a.click("#send")
	const pending = `document.querySelector('#approvals .approval[data-state="pending"]')`
	for _, p := range []*page{a, o} {
		p.until("the pending approval", pending)
	}
	o.until("B's notification, shown by the browser", `window.__notes.some(n => n.title.endsWith(": waiting for an approval") && n.shown)`)
	// Let later updates of the approval arrive, then count: the answer
	// resolves it, which must not notify "waiting" again.
	a.click(`#approvals .approval[data-state="pending"] button.choice`)
	for _, p := range []*page{a, o} {
		p.until("the gate answered", textHas("#transcript", "after the gate")+` && `+textHas("#engine", "idle"))
	}
	notes := eval[[]note](o, `window.__notes`)
	var waiting []note
	for _, n := range notes {
		if n.Title == "mosaic "+id+": waiting for an approval" {
			waiting = append(waiting, n)
		}
	}
	if len(waiting) != 1 {
		t.Fatalf("B raised %d approval notifications, want exactly one: %+v", len(waiting), notes)
	}
	if want := terminal.SanitizeLine(piext.GateTitle); waiting[0].Body != want[:min(len(want), 200)] {
		t.Errorf("the notification's body is %q, want the gate's title made inert %q", waiting[0].Body, want)
	}
	t.Logf("B's notifications: %+v", notes)
	if n := eval[int](a, `window.__notes.length`); n != 0 {
		t.Errorf("A, without the permission, raised %d notifications", n)
	}
}
