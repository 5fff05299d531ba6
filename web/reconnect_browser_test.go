package web_test

import (
	"fmt"
	"io"
	"log"
	"net"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/mosaic-agents/mosaic/contrib/sandboxtest"
	"github.com/mosaic-agents/mosaic/contrib/stubmodel"
	"github.com/mosaic-agents/mosaic/web"
)

// blip is a loopback TCP relay in front of the web server that the test
// can cut: every connection through it is closed and new ones are closed
// at once until it is mended, as a network blip or a sleeping phone does
// to a page's event stream. The server sees the relay (this process, a
// process of the operator's) as its peer.
type blip struct {
	l      net.Listener
	target string
	mu     sync.Mutex
	down   bool
	conns  map[net.Conn]bool
}

// newBlip listens at once (the server must know the relay's address as a
// Host it answers to) and relays once to is called.
func newBlip(t *testing.T) *blip {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	b := &blip{l: l, conns: map[net.Conn]bool{}}
	t.Cleanup(func() { l.Close(); b.cut() })
	return b
}

func (b *blip) to(target string) {
	b.target = target
	go b.serve()
}

func (b *blip) addr() string { return b.l.Addr().String() }

func (b *blip) serve() {
	for {
		c, err := b.l.Accept()
		if err != nil {
			return
		}
		b.mu.Lock()
		if b.down {
			b.mu.Unlock()
			c.Close()
			continue
		}
		u, err := net.Dial("tcp", b.target)
		if err != nil {
			b.mu.Unlock()
			c.Close()
			continue
		}
		b.conns[c], b.conns[u] = true, true
		b.mu.Unlock()
		go func() { io.Copy(u, c); u.Close() }()
		go func() { io.Copy(c, u); c.Close() }()
	}
}

func (b *blip) cut() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.down = true
	for c := range b.conns {
		c.Close()
	}
	clear(b.conns)
}

func (b *blip) mend() {
	b.mu.Lock()
	b.down = false
	b.mu.Unlock()
}

// TestBrowserReconnect (sandbox, Chromium, the real Pi and the stub
// model): page A reaches the server through a relay the test cuts, page B
// directly. While A's stream is cut for longer than its tab's grace (its
// connection is closed), B prompts; when the relay is mended, A's page
// resumes on a new connection from the last event it held, through the
// controller's replay ring: it shows the answer it missed exactly once and
// the same transcript as B, under the same tab, with no reconcile marker.
// Then A is cut again while B force-stops and recovers (a new execution:
// the old one's replay ring is gone); A comes back with a reconcile marker
// and the conversation read again, as B shows it.
func TestBrowserReconnect(t *testing.T) {
	sandboxtest.Require(t)
	id := convPi(t, "webreconnect", stubmodel.Script{Turns: []stubmodel.Turn{
		{Text: []string{"Answer one."}},
		{Text: []string{"Answer two, ", "streamed while ", "A was away."}},
		{Text: []string{"Answer three, ", "after the recover."}},
	}})
	var logs logLines
	relay := newBlip(t)
	s := startServer(t, web.Options{Log: log.New(io.MultiWriter(&logs, testWriter{t}), "server: ", 0),
		TabGrace: 2 * time.Second, Hosts: []string{relay.addr()}})
	relay.to(strings.TrimPrefix(s.base, "http://"))
	br := startBrowser(t)
	a, b := newPage(t, br, "A"), newPage(t, br, "B")
	viaRelay := testServer{base: "http://" + relay.addr(), store: s.store}
	a.login(viaRelay, id)
	b.login(s, id)
	a.run("open the conversation", chromedp.Navigate(viaRelay.base+"/c/"+id))
	b.run("open the conversation", chromedp.Navigate(s.base+"/c/"+id))
	for _, p := range []*page{a, b} {
		p.until("an observer view of a running engine", textHas("#mode", "observer")+` && `+textHas("#engine", "idle"))
	}
	b.click("#take")
	b.until("B in control", `document.querySelector("#mode").textContent === "controller"`)
	b.set("#text", "one")
	b.click("#send")
	for _, p := range []*page{a, b} {
		p.until("answer one", textHas("#transcript", "Answer one."))
		p.until("the engine idle", textHas("#engine", "idle"))
	}
	tab := eval[string](a, `mosaicState().tab`)

	// away cuts A's stream until its tab's connection is closed (its
	// place kept), runs while, and mends the relay.
	parked := fmt.Sprintf("tab %s: no stream for 2s: closing its connection and keeping its place", tab)
	away := func(t *testing.T, a *page, while func()) {
		t.Helper()
		n := logs.count(parked)
		relay.cut()
		a.until("A's stream interrupted", textHas("#notice", "stream interrupted"))
		for deadline := time.Now().Add(time.Minute); logs.count(parked) == n; time.Sleep(100 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("A's tab was not closed and parked: no %q in the log", parked)
			}
		}
		while()
		relay.mend()
	}

	t.Run("reconnect resumes through the replay ring", func(t *testing.T) {
		a, b := a.on(t), b.on(t)
		away(t, a, func() {
			b.set("#text", "two")
			b.click("#send")
			b.until("answer two in B", textHas("#transcript", "A was away.")+` && `+textHas("#engine", "idle"))
		})
		a.until("answer two in A", textHas("#transcript", "Answer two, streamed while A was away.")+` && `+textHas("#engine", "idle"))
		if got := eval[string](a, `mosaicState().tab`); got != tab {
			t.Errorf("A came back as tab %s, want its own tab %s", got, tab)
		}
		if !logs.has(fmt.Sprintf("tab %s: resumed on connection ", tab)) {
			t.Errorf("A's tab was not resumed from a seq: the log lacks its resume")
		}
		at, bt := settled(t, a, b)
		for _, want := range []string{"Answer one.", "Answer two, streamed while A was away."} {
			if n := strings.Count(at, want); n != 1 {
				t.Errorf("A shows %q %d times, want once", want, n)
			}
		}
		if at != bt {
			t.Errorf("A's transcript after the resume differs from B's:\nA: %q\nB: %q", at, bt)
		}
		if n := eval[int](a, `document.querySelectorAll("#records .rec.reconcile").length`); n != 0 {
			t.Errorf("A shows %d reconcile markers after a clean resume", n)
		}
	})

	t.Run("a gap the ring cannot fill is marked and read again", func(t *testing.T) {
		a, b := a.on(t), b.on(t)
		away(t, a, func() {
			b.click("#stop")
			b.until("the force stop dialog", `document.querySelector("#confirm").open && `+textHas("#confirm-intent", "force stop execution"))
			b.click("#confirm-yes")
			b.until("the proof", textHas("#confirm-result", ": stopped · proof "))
			b.click("#confirm-no")
			b.click("#recover")
			b.until("the recover dialog", `document.querySelector("#confirm").open && `+textHas("#confirm-intent", "recover conversation "+id))
			b.click("#confirm-yes")
			b.until("the launch", textHas("#confirm-result", "launch launched"))
			b.click("#confirm-no")
			b.until("a new execution idle", textHas("#engine", "idle")+` && `+textHas("#status", "binding active"))
		})
		a.until("the reconcile marker in A", textHas("#records .rec.reconcile", "re-read: this page was away longer than the controller's replay window"))
		exec := eval[string](b, `mosaicState().execution`)
		a.until("A on the new execution", fmt.Sprintf(`mosaicState().execution === %q`, exec))
		at, bt := settled(t, a, b)
		if strings.Count(at, "Answer two, streamed while A was away.") != 1 || at != bt {
			t.Errorf("A's transcript after the re-read differs from B's or repeats:\nA: %q\nB: %q", at, bt)
		}
		// And A goes on live: B's next answer reaches it.
		b.set("#text", "three")
		b.click("#send")
		a.until("answer three in A", textHas("#transcript", "Answer three, after the recover."))
	})
}

// settled returns the transcripts of pages a and b once both show no
// marker and the same lines, or, at the deadline, what they show then.
//
// Nothing on one page says its transcript has caught up: the client
// library notes each record in the connection's state (the page's
// execution, engine and status) as it reads it, and the tab folds it into
// the transcript only when it takes it from the update queue, so a page
// can say "idle" on the new execution while its transcript still lacks
// the run's last events or still shows what it held before; and a
// re-read's fresh page lands a round trip after the marker that asked for
// it. So what is checked is where the two pages land, not what they show
// the first moment their states agree.
func settled(t *testing.T, a, b *page) (at, bt string) {
	t.Helper()
	type shown struct {
		Text   string `json:"text"`
		Marker bool   `json:"marker"`
	}
	const js = `({text: document.querySelector("#transcript").textContent, marker: !!document.querySelector("#transcript .item.marker")})`
	for deadline := time.Now().Add(90 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		as, bs := eval[shown](a, js), eval[shown](b, js)
		if !as.Marker && !bs.Marker && as.Text == bs.Text || time.Now().After(deadline) {
			return as.Text, bs.Text
		}
	}
}

// TestBrowserReconnectNoFalseTakeover (sandbox, Chromium, the real Pi):
// page A holds control through a relay the test cuts for longer than its
// tab's grace, so the server closes A's connection; nobody else takes
// control. When A comes back it observes on a new connection, and its
// page must say so and why, not that another client took control (none did),
// which would send the person looking for a client that does not exist. A real takeover, by a
// terminal, is then still told as one.
func TestBrowserReconnectNoFalseTakeover(t *testing.T) {
	sandboxtest.Require(t)
	id := convPi(t, "webaway", stubmodel.Script{})
	var logs logLines
	relay := newBlip(t)
	s := startServer(t, web.Options{Log: log.New(io.MultiWriter(&logs, testWriter{t}), "server: ", 0),
		TabGrace: 2 * time.Second, Hosts: []string{relay.addr()}})
	relay.to(strings.TrimPrefix(s.base, "http://"))
	a := newPage(t, startBrowser(t), "A")
	viaRelay := testServer{base: "http://" + relay.addr(), store: s.store}
	a.login(viaRelay, id)
	a.run("open the conversation", chromedp.Navigate(viaRelay.base+"/c/"+id))
	a.until("an observer view of a running engine", textHas("#mode", "observer")+` && `+textHas("#engine", "idle"))
	a.click("#take")
	a.until("A in control", `document.querySelector("#mode").textContent === "controller"`)
	conn := eval[string](a, `mosaicState().connection`)
	tab := eval[string](a, `mosaicState().tab`)

	relay.cut()
	a.until("A's stream interrupted", textHas("#notice", "stream interrupted"))
	parked := fmt.Sprintf("tab %s: no stream for 2s: closing its connection and keeping its place", tab)
	for deadline := time.Now().Add(time.Minute); !logs.has(parked); time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("A's tab was not closed and parked: no %q in the log", parked)
		}
	}
	relay.mend()
	a.until("A observing on a new connection", fmt.Sprintf(`mosaicState().connection !== %q && mosaicState().bound && mosaicState().mode === "observer"`, conn))
	if c := eval[string](a, `mosaicState().controller`); c != "" && c != conn {
		t.Fatalf("the controller is %q after A's connection closed, want none or A's closed connection %q", c, conn)
	}
	note := eval[string](a, `document.querySelector("#notice").textContent`)
	if strings.Contains(note, "another client took control") || !strings.Contains(note, "this tab's connection was closed (the page had no event stream for 2s)") {
		t.Errorf("A's notice after its own connection was closed reads %q: want it to say that its connection was closed, not that another client took control", note)
	}

	t.Run("a real takeover is told as one", func(t *testing.T) {
		a := a.on(t)
		a.click("#take")
		a.until("A in control again", `document.querySelector("#mode").textContent === "controller"`)
		bin := sandboxtest.Bin(t, "mosaicctl")
		// Takes control and resumes a queue with nothing in it: a
		// takeover with no other effect. (An interrupt of the idle
		// engine is refused before any takeover.)
		out, err := exec.Command(bin, "queue", "resume", "--take", id).CombinedOutput()
		t.Logf("mosaicctl queue resume --take: %v: %s", err, out)
		a.until("the takeover told", textHas("#notice", "another client took control"))
	})
}
