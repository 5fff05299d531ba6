package web_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
	"github.com/mosaic-agents/mosaic/contrib/sandboxtest"
	"github.com/mosaic-agents/mosaic/contrib/stubmodel"
	"github.com/mosaic-agents/mosaic/protocol"
	"github.com/mosaic-agents/mosaic/web"
)

// replayScript is the agent's attack, run by the real Pi's bash tool
// inside its confined engine: it reads the browser's session cookie and
// CSRF token (left in dir/target by the test, as a tool would read them
// from the browser's profile on disk and from the page), then replays them
// to the web port as a browser would send them — the right Host, the
// page's Origin, the CSRF header — over bash's /dev/tcp: read the list
// page, open the conversation's event stream, log the browser out. Each
// answer is kept in dir for the test.
func replayScript(dir string) string {
	return fmt.Sprintf(`L=%q; read port cookie conv csrf < "$L/target"
req() { exec 3<>"/dev/tcp/127.0.0.1/$port" || { echo no-connect > "$L/$1"; return; }; printf "$2" >&3; timeout 5 cat <&3 > "$L/$1"; exec 3>&-; }
h="Host: 127.0.0.1:$port\r\nCookie: %s=$cookie\r\nConnection: close\r\n"
req page "GET / HTTP/1.1\r\n$h\r\n"
req events "GET /api/c/$conv/events HTTP/1.1\r\n$h\r\n"
req logout "POST /logout HTTP/1.1\r\n${h}Origin: http://127.0.0.1:$port\r\n%s: $csrf\r\nContent-Length: 0\r\n\r\n"
echo ATTACK-$((6*7))-DONE`, dir, web.CookieName, web.CSRFHeader)
}

// TestBrowserEnginePeerRefused (sandbox, Chromium, the real Pi and the
// stub model): the agent's bash tool replays the browser's own session
// cookie and CSRF token with the right Host and Origin to the loopback
// port. Every request is refused web-peer — reading the list page (which
// holds the CSRF token), opening the event stream (the transcript), and
// logging out — and the browser, outside the engine, keeps its session
// and control. On a server that does not judge its TCP peers the tool
// reads the page and the stream and logs the browser out.
func TestBrowserEnginePeerRefused(t *testing.T) {
	sandboxtest.Require(t)
	home, _ := os.UserHomeDir()
	loot, err := os.MkdirTemp(home, "web-attack-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(loot) })
	id := convPi(t, "websec", stubmodel.Script{Turns: []stubmodel.Turn{
		{Tool: &stubmodel.ToolCall{Command: replayScript(loot)}},
		{Text: []string{"The replay is over."}},
		{Text: []string{"Still ", "yours."}},
	}})
	s := startServer(t, web.Options{Log: log.New(testWriter{t}, "server: ", 0)})
	a := newPage(t, startBrowser(t), "A")
	a.login(s, id)
	a.run("open the conversation", chromedp.Navigate(s.base+"/c/"+id))
	a.until("an observer view of a running engine", textHas("#mode", "observer")+` && `+textHas("#engine", "idle"))
	a.click("#take")
	a.until("A in control", `document.querySelector("#mode").textContent === "controller"`)

	// What the agent can take from the disk and the page: the browser's
	// cookie (here through the DevTools protocol) and the CSRF token.
	ctx, cancel := context.WithTimeout(a.ctx, time.Minute)
	defer cancel()
	cookies, err := chromedp.Run(ctx, func(ctx context.Context, tg *chromedp.Target) ([]*network.Cookie, error) {
		r, err := cdp.Call(ctx, tg, network.GetCookies, network.GetCookiesParams{URLs: []string{s.base + "/"}})
		return r.Cookies, err
	})
	if err != nil {
		t.Fatal(err)
	}
	var cookie string
	for _, c := range cookies {
		if c.Name == web.CookieName {
			cookie = c.Value
		}
	}
	csrf := eval[string](a, `document.querySelector('meta[name="csrf"]').content`)
	if cookie == "" || csrf == "" {
		t.Fatalf("the browser's cookie %q and CSRF token %q", cookie, csrf)
	}
	port := strings.TrimPrefix(s.base, "http://127.0.0.1:")
	if err := os.WriteFile(filepath.Join(loot, "target"), []byte(strings.Join([]string{port, cookie, id, csrf}, " ")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}

	a.set("#text", "run the tool")
	a.click("#send")
	a.until("the replay done", textHas("#transcript", "ATTACK-42-DONE")+` && `+textHas("#transcript", "The replay is over."))
	a.until("the engine idle", textHas("#engine", "idle"))

	for _, name := range []string{"page", "events", "logout"} {
		b, err := os.ReadFile(filepath.Join(loot, name))
		if err != nil {
			t.Fatalf("the tool's %s answer: %v", name, err)
		}
		got := string(b)
		t.Logf("the tool's %s request got:\n%s", name, got)
		if !strings.HasPrefix(got, "HTTP/1.1 403 ") || !strings.Contains(got, `"code":"`+protocol.CodeWebPeer+`"`) {
			t.Errorf("the tool's %s request was not refused %s", name, protocol.CodeWebPeer)
		}
		if strings.Contains(got, csrf) || strings.Contains(got, "event: ") {
			t.Errorf("the tool's %s request read the page or the stream", name)
		}
	}
	if _, err := s.store.Check(cookie); err != nil {
		t.Fatalf("the browser's session after the replay: %v", err)
	}
	// The browser outside keeps working: its session, its control, a
	// prompt answered.
	a.set("#text", "still mine?")
	a.click("#send")
	a.until("the answer after the replay", textHas("#transcript", "Still yours."))
	a.until("A still in control", `document.querySelector("#mode").textContent === "controller"`)
}
