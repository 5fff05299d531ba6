package web_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/mosaic-agents/mosaic/contrib/sandboxtest"
	"github.com/mosaic-agents/mosaic/contrib/stubmodel"
	"github.com/mosaic-agents/mosaic/web"
)

// chromium is Debian's browser (.ci/run installs it).
const chromium = "/usr/bin/chromium"

// hostile is engine text that would act if it were rendered as markup or
// written to a terminal: a script, an element with a handler, a
// javascript: link in Markdown and as a bare URL, ANSI colour and
// title-setting escapes, and a bidi override that reverses what follows.
const hostile = "<script>window.pwned=1</script><img src=x onerror=\"window.pwned=2\">" +
	"[click](javascript:window.pwned=3) javascript:window.pwned=4 \x1b[31mred\x1b[0m\x1b]0;title\x07 \u202Egnp.exe\u202C end"

// convPi registers a conversation on the real pinned Pi with the stub
// model playing script and starts its socket. The cleanup stops the
// engine with a proof first (the socket and service alone leave it
// running), then the units. extra are more `conv add` flags.
func convPi(t *testing.T, seat string, script stubmodel.Script, extra ...string) string {
	t.Helper()
	id, _ := convPiStub(t, seat, script, extra...)
	return id
}

// convPiStub is convPi that also returns the stub model, whose requests
// are the evidence of what reached the model.
func convPiStub(t *testing.T, seat string, script stubmodel.Script, extra ...string) (string, *stubmodel.Server) {
	t.Helper()
	return convPiSession(t, seat, script, nil, extra...)
}

// convPiSession is convPiStub that first lets session write the session
// file the engine resumes (nil: the engine starts a new one), given the
// project directory and the file's path.
func convPiSession(t *testing.T, seat string, script stubmodel.Script, session func(proj, path string), extra ...string) (string, *stubmodel.Server) {
	t.Helper()
	bin := sandboxtest.Bin(t, "mosaicctl")
	pi, model, stub := sandboxtest.StubPi(t, script)
	sh := func(args ...string) string {
		out, err := exec.Command(bin, args...).CombinedOutput()
		if err != nil {
			t.Fatalf("mosaicctl %v: %v\n%s", args, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	sh("install")
	t.Cleanup(func() { exec.Command(bin, "uninstall", "--force").Run() })
	home, _ := os.UserHomeDir()
	proj, err := os.MkdirTemp(home, "proj-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(proj) })
	sessions := filepath.Join(proj, ".pi", "state", seat, "sessions")
	if err := os.MkdirAll(sessions, 0o755); err != nil {
		t.Fatal(err)
	}
	if session != nil {
		session(proj, filepath.Join(sessions, "main.jsonl"))
	}
	id := sh(append([]string{"conv", "add", "--project", proj, "--seat", seat, "--session", filepath.Join(sessions, "main.jsonl"),
		"--engine", pi, "--provider", model.Provider, "--model", model.Model, "--agent-dir", model.AgentDir}, extra...)...)
	if out, err := exec.Command("systemctl", "--user", "start", "mosaic-conv@"+id+".socket").CombinedOutput(); err != nil {
		t.Fatalf("start socket: %v: %s", err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command(bin, "stop", "--take", "--yes", "--timeout", "1m", id).CombinedOutput(); err != nil {
			t.Logf("cleanup: stop %s: %v: %s", id, err, out)
		}
		exec.Command("systemctl", "--user", "stop", "mosaic-conv@"+id+".socket", "mosaic-conv@"+id+".service").Run()
	})
	return id, stub
}

// startBrowser starts headless Chromium with the flags this machine's
// closed network needs, in a fresh profile. Nothing leaves loopback.
func startBrowser(t *testing.T) context.Context {
	t.Helper()
	if _, err := os.Stat(chromium); err != nil {
		sandboxtest.Unavailable(t, "no %s: apt-get install chromium (.ci/run does)", chromium)
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(chromium), chromedp.NoSandbox,
		chromedp.DisableGPU, chromedp.UserDataDir(t.TempDir()), chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-dev-shm-usage", true), chromedp.Flag("disable-crash-reporter", true),
		// Its crash database and caches, out of the caller's own home:
		// outside the sandbox the browser runs as the caller.
		chromedp.Env("XDG_CONFIG_HOME="+t.TempDir(), "XDG_CACHE_HOME="+t.TempDir()))
	actx, cancel := chromedp.NewExecAllocator(context.Background(), opts...)
	t.Cleanup(cancel)
	bctx, bcancel := chromedp.NewContext(actx)
	t.Cleanup(bcancel)
	if err := chromedp.Do(bctx); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	return bctx
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(b []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(b)))
	return len(b), nil
}

// page is one browser context (its own cookie jar) with one tab.
type page struct {
	t   *testing.T
	ctx context.Context
	who string
}

func newPage(t *testing.T, browser context.Context, who string) *page {
	ctx, cancel := chromedp.NewContext(browser, chromedp.WithNewBrowserContext())
	t.Cleanup(cancel)
	// The first run opens the tab and ties it to the context it is given:
	// later runs take timeouts derived from this one.
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("%s: open a tab: %v", who, err)
	}
	return &page{t: t, ctx: ctx, who: who}
}

// on returns p failing and logging through t: a subtest's helpers must
// fail the subtest, since Fatal on the parent from a subtest's goroutine
// does not stop the subtest ("subtest may have called FailNow on a parent
// test") and leaves it running to its own timeouts.
func (p *page) on(t *testing.T) *page {
	q := *p
	q.t = t
	return &q
}

// twoTabs serves the web surface and opens conversation id in two
// browser contexts, A and B, each logged in with its own token; A takes
// control and B is an observer with a controller present.
func twoTabs(t *testing.T, id string) (s testServer, a, o *page) {
	t.Helper()
	s = startServer(t, web.Options{Log: log.New(testWriter{t}, "server: ", 0)})
	b := startBrowser(t)
	a, o = newPage(t, b, "A"), newPage(t, b, "B")
	for _, p := range []*page{a, o} {
		p.login(s, id)
		p.run("open the conversation", chromedp.Navigate(s.base+"/c/"+id))
		p.until("an observer view of a running engine", textHas("#mode", "observer")+` && `+textHas("#engine", "idle"))
	}
	a.click("#take")
	a.until("A in control", `document.querySelector("#mode").textContent === "controller"`)
	o.until("B an observer with a controller present", `document.querySelector("#mode").textContent === "observer"`)
	return s, a, o
}

// login redeems a fresh one-time token and waits for conversation id in
// the live list.
func (p *page) login(s testServer, id string) {
	p.t.Helper()
	tok, err := s.store.NewToken()
	if err != nil {
		p.t.Fatal(err)
	}
	p.run("login", chromedp.Navigate(s.base+"/login?token="+tok))
	p.until("the conversation in the live list", fmt.Sprintf(`!!document.querySelector('tr[data-id=%q] a')`, id))
	p.until("the token off the address bar", `location.pathname === "/" && location.search === ""`)
}

// loginList logs the page in with a fresh token and waits for the list's
// stream to be live.
func (p *page) loginList(s testServer) {
	p.t.Helper()
	tok, err := s.store.NewToken()
	if err != nil {
		p.t.Fatal(err)
	}
	p.run("login", chromedp.Navigate(s.base+"/login?token="+tok))
	p.until("logged in, list live", `location.pathname === "/" && document.querySelector("#conn").textContent === "live"`)
}

func (p *page) run(what string, actions ...chromedp.Action[chromedp.Void]) {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(p.ctx, 3*time.Minute) // a bound against a hang
	defer cancel()
	if err := chromedp.Do(ctx, actions...); err != nil {
		p.fail(what, err)
	}
}

func (p *page) fail(what string, err error) {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(p.ctx, 10*time.Second)
	defer cancel()
	dump, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`location.href + "\n" + document.body.innerText`))
	p.t.Fatalf("%s: %s: %v\npage text:\n%s", p.who, what, err, dump)
}

// until waits until the JavaScript expression is true.
func (p *page) until(what, js string) {
	p.t.Helper()
	p.t.Logf("%s: waiting for %s", p.who, what)
	p.run("wait for "+what, chromedp.Poll[chromedp.Void](js, chromedp.WithPollingTimeout(90*time.Second), chromedp.WithPollingInterval(100*time.Millisecond)))
}

// eval evaluates js (awaiting a promise) into T.
func eval[T any](p *page, js string) T {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(p.ctx, 3*time.Minute)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](js, chromedp.EvalAwaitPromise))
	if err != nil {
		p.fail("evaluate "+js, err)
	}
	return v
}

func (p *page) click(sel string) {
	p.t.Helper()
	p.run("click "+sel, chromedp.Click(chromedp.CSS(sel)))
}

func (p *page) set(sel, v string) {
	p.t.Helper()
	p.run("type into "+sel, chromedp.SetValue(chromedp.CSS(sel), v))
}

// refusedAndKept sends text and checks that the page shows the refusal
// code and that the composer still holds the text.
func (p *page) refusedAndKept(text, code string) {
	p.t.Helper()
	p.set("#text", text)
	p.click("#send")
	p.until("the refusal "+code, textHas("#notice", "refused "+code+":"))
	if kept := eval[string](p, `document.querySelector("#text").value`); kept != text {
		p.t.Fatalf("%s: the composer holds %q after the %s refusal, want %q", p.who, kept, code, text)
	}
}

func textHas(sel, s string) string {
	return fmt.Sprintf(`(document.querySelector(%q)||{textContent:""}).textContent.includes(%q)`, sel, s)
}

// TestBrowserConversation drives the two pages in Debian's Chromium
// against the real Pi and the stub model: log in with a token, see the
// list, open the conversation in two browser contexts, take control in
// one, prompt, and watch the streamed answer and the tool call arrive in
// both without a reload; the observer's send is refused and its text
// kept; a takeover from the second flips the modes; a prompt while busy is
// queued; interrupt; a force stop through the dialog that shows
// its intent, then the proof; recover and launch; a stale view's command
// refused; hostile engine text inert.
func TestBrowserConversation(t *testing.T) {
	sandboxtest.Require(t)
	id := convPi(t, "web", stubmodel.Script{Turns: []stubmodel.Turn{
		{Text: []string{"Streaming ", "the first ", "answer. ", hostile}, Tool: &stubmodel.ToolCall{Command: "echo tool-output-$((6*7))"}},
		{Text: []string{"The tool ", "said 42."}},
		{Endless: true, ChunkDelayMS: 50},
	}})
	s, a, o := twoTabs(t, id)

	a.set("#text", "run the tool")
	a.click("#send")
	for _, p := range []*page{a, o} {
		p.until("the streamed answer", textHas("#transcript", "Streaming the first answer."))
		p.until("the tool call and its result", textHas("#transcript", "echo tool-output-$((6*7))")+` && `+
			textHas("#transcript", "tool-output-42"))
		p.until("the answer after the tool", textHas("#transcript", "The tool said 42."))
		p.until("the engine idle again", textHas("#engine", "idle"))
	}
	sent := eval[string](a, `document.querySelector("#text").value`)
	if sent != "" {
		t.Errorf("A's composer holds %q after an acknowledged prompt; want it cleared", sent)
	}

	t.Run("hostile text is inert", func(t *testing.T) {
		a, o := a.on(t), o.on(t)
		for _, p := range []*page{a, o} {
			type found struct {
				Pwned   bool   `json:"pwned"`
				Scripts int    `json:"scripts"`
				Links   int    `json:"links"`
				Imgs    int    `json:"imgs"`
				Text    string `json:"text"`
			}
			r := eval[found](p, `({pwned: window.pwned !== undefined,
				scripts: document.querySelectorAll("#transcript script").length,
				links: document.querySelectorAll("#transcript a, #records a").length,
				imgs: document.querySelectorAll("#transcript img").length,
				text: document.querySelector("#transcript").textContent})`)
			if r.Pwned || r.Scripts != 0 || r.Links != 0 || r.Imgs != 0 {
				t.Errorf("%s: engine text became markup: %+v", p.who, r)
			}
			for _, want := range []string{"<script>window.pwned=1</script>", `onerror="window.pwned=2"`,
				"[click](javascript:window.pwned=3)", "^[[31mred^[[0m", "^[]0;title^G", "<U+202E>gnp.exe<U+202C>"} {
				if !strings.Contains(r.Text, want) {
					t.Errorf("%s: the transcript does not show %q as text", p.who, want)
				}
			}
			if strings.ContainsAny(r.Text, "\x1b\u202E\u202C\x07") {
				t.Errorf("%s: a control or bidi character reached the page as itself", p.who)
			}
		}
	})

	t.Run("an observer cannot send and keeps its text", func(t *testing.T) {
		o := o.on(t)
		o.refusedAndKept("from the observer", "not-controller")
	})

	before := eval[int64](o, `mosaicState().generation`)
	o.click("#take")
	o.until("B in control", `document.querySelector("#mode").textContent === "controller"`)
	a.until("A an observer", `document.querySelector("#mode").textContent === "observer"`)

	t.Run("a stale view's command is refused", func(t *testing.T) {
		a := a.on(t)
		// A's page acts on the generation it showed before B's takeover,
		// as a click racing the update would.
		code := eval[string](a, fmt.Sprintf(`mosaic.post("/api/c/%s/command", {tab: mosaicState().tab, op: "takeover", generation: %d}).then(j => j.refusal ? j.refusal.code : "accepted")`,
			id, before))
		if code != "stale-generation" {
			t.Fatalf("a takeover naming generation %d after B's takeover: %q, want stale-generation", before, code)
		}
		a.until("A still an observer", `document.querySelector("#mode").textContent === "observer"`)
	})

	o.set("#text", "keep going")
	o.click("#send")
	o.until("the engine busy", textHas("#engine", "busy"))
	a.until("the engine busy in A", textHas("#engine", "busy")+` && document.title.startsWith("[busy")`)

	t.Run("a prompt while busy is queued", func(t *testing.T) {
		o := o.on(t)
		o.set("#text", "second while busy")
		o.click("#send")
		// The prompt before it was queued too: its chip, not the notice,
		// says this one is held.
		o.until("the prompt queued", textHas("#queue .chip[data-state=queued] .chip-text", "second while busy")+` && `+textHas("#notice", "queued (item "))
		if kept := eval[string](o, `document.querySelector("#text").value`); kept != "" {
			t.Fatalf("the composer holds %q once the prompt is queued durably, want it cleared", kept)
		}
	})

	o.click("#interrupt")
	o.until("the interrupt reconciled", textHas("#notice", "interrupt reconciled"))
	o.until("the engine idle after the interrupt", textHas("#engine", "idle"))

	o.click("#stop")
	o.until("the dialog with what will be stopped", `document.querySelector("#confirm").open && `+
		textHas("#confirm-intent", "force stop execution")+` && `+textHas("#confirm-intent", "kill every process in mosaic-engine-"))
	o.click("#confirm-yes")
	o.until("the proof in the dialog", textHas("#confirm-result", ": stopped")+` && `+textHas("#confirm-result", ": stopped · proof ")+` && `+textHas("#confirm-result", `"type":"cohort"`))
	a.until("the stop and its proof in the observer", textHas("#records", ": stopped · proof "))
	o.click("#confirm-no")

	t.Run("the force stop's draft goes back to the composer, unsent", func(t *testing.T) {
		a, o := a.on(t), o.on(t)
		// The prompt queued while busy was held by the interrupt's pause;
		// the force stop recovered it as a draft.
		const draft = `document.querySelector("#drafts .draft")`
		for _, p := range []*page{a, o} {
			p.until("the recovered draft", draft+` && `+textHas("#drafts .draft .chip-text", "second while busy")+
				` && document.querySelectorAll("#queue .chip").length === 0`)
		}
		eval[bool](o, `(document.querySelector("#text").value = "") === ""`)
		o.click("#drafts .draft button.draft-put-back")
		o.until("the draft in the composer", `document.querySelector("#text").value === "second while busy" && `+textHas("#notice", "nothing was sent")+` && !`+draft)
		if n := eval[int](o, `document.querySelectorAll("#queue .chip").length`); n != 0 {
			t.Errorf("putting a draft back queued %d items; want none", n)
		}
		eval[bool](o, `(document.querySelector("#text").value = "") === ""`)
	})

	o.click("#recover")
	o.until("the recover dialog", `document.querySelector("#confirm").open && `+textHas("#confirm-intent", "recover conversation "+id))
	o.click("#confirm-yes")
	o.until("the launch", textHas("#confirm-result", "launch launched"))
	o.click("#confirm-no")
	o.until("a new execution idle", textHas("#engine", "idle")+` && `+textHas("#status", "binding active"))

	t.Run("the list follows a change made elsewhere", func(t *testing.T) {
		a, o := a.on(t), o.on(t)
		gen := eval[int64](o, `mosaicState().generation`)
		a.run("open the list", chromedp.Navigate(s.base+"/"))
		row := fmt.Sprintf(`document.querySelector('tr[data-id=%q]')`, id)
		a.until("the row at the current generation", fmt.Sprintf(`%s && %s.children[3].textContent === "%d"`, row, row, gen))
		// A terminal takes control: the list shows the new generation
		// without a reload.
		bin := sandboxtest.Bin(t, "mosaicctl")
		if out, err := exec.Command(bin, "prompt", "--take", id, "from the terminal").CombinedOutput(); err != nil {
			t.Fatalf("mosaicctl prompt --take: %v\n%s", err, out)
		}
		a.until("the row at the next generation", fmt.Sprintf(`%s.children[3].textContent === "%d"`, row, gen+1))
		o.until("B an observer after the terminal's takeover", `document.querySelector("#mode").textContent === "observer"`)
		o.until("the terminal's prompt in B", textHas("#transcript", "from the terminal"))
	})

	shots(t, s, id, a)

	t.Run("a revoked session's page is closed", func(t *testing.T) {
		o := o.on(t)
		list, err := s.store.Sessions()
		if err != nil || len(list) != 2 {
			t.Fatalf("sessions %v, %v: want A's and B's", list, err)
		}
		if _, err := s.store.Revoke(list[1].ID); err != nil { // B logged in second
			t.Fatal(err)
		}
		o.until("the revocation on B's page", textHas("#notice", "revoked"))
		code := eval[string](o, fmt.Sprintf(`mosaic.post("/api/c/%s/command", {tab: mosaicState().tab, op: "interrupt", generation: mosaicState().generation}).then(j => j.refusal ? j.refusal.code : "accepted")`, id))
		if code != "web-auth" {
			t.Fatalf("a revoked page's command: %q, want web-auth", code)
		}
	})
}

// shots writes the screenshots of docs/web.md when MOSAIC_WEB_SHOTS names
// a directory: both pages at desktop and at phone size.
func shots(t *testing.T, s testServer, id string, p *page) {
	dir := os.Getenv("MOSAIC_WEB_SHOTS")
	if dir == "" {
		return
	}
	for _, size := range []struct {
		name string
		w, h int64
		mob  bool
	}{{"desktop", 1280, 860, false}, {"phone", 390, 844, true}} {
		for _, pg := range []struct{ name, url string }{{"list", s.base + "/"}, {"conversation", s.base + "/c/" + id}} {
			emu := []chromedp.EmulateViewportOption{chromedp.EmulateScale(1)}
			if size.mob {
				emu = append(emu, chromedp.EmulateMobile)
			}
			p.run("open "+pg.name, chromedp.EmulateViewport(size.w, size.h, emu...), chromedp.Navigate(pg.url),
				chromedp.Poll[chromedp.Void](`document.querySelector("#mode") ? document.querySelector("#transcript").children.length > 3 : document.querySelectorAll("#rows tr").length > 0`, chromedp.WithPollingInterval(100*time.Millisecond)),
				chromedp.Sleep(time.Second))
			png, err := chromedp.Run(p.ctx, chromedp.CaptureScreenshot())
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, "web-"+pg.name+"-"+size.name+".png"), png, 0o644); err != nil {
				t.Error(err)
			}
		}
	}
}
