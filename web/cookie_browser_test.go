package web_test

import (
	"context"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"

	"github.com/mosaic-agents/mosaic/contrib/sandboxtest"
	"github.com/mosaic-agents/mosaic/protocol"
	"github.com/mosaic-agents/mosaic/web"
)

// TestBrowserPlantedCookie (Chromium): cookies are not kept apart by port,
// so a page an engine's tool serves on another loopback port (a dev
// server the model asks the user to open) can set cookies of the
// session's name for 127.0.0.1 at every prefix of a conversation's paths
// (the tool knows its own conversation's id), longer than the session's
// "/", so that the browser sends them first, and partitioned ones (CHIPS:
// the partition is the top-level site, the same for every port) beside
// them. The server takes the first live session among all the cookies of
// its name: the list and the conversation's stream stay the user's with
// no new login, and the planted cookies are expired by the answers. A
// request that carries only dead cookies is told to delete them.
func TestBrowserPlantedCookie(t *testing.T) {
	sandboxtest.Require(t)
	var logs logLines
	o := noConversations
	o.Log = log.New(io.MultiWriter(&logs, testWriter{t}), "server: ", 0)
	s := startServer(t, o)
	l, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	// Well formed, so that each costs the server a look in its store.
	fake := func(i int) string { return fmt.Sprintf("%016x.%064x", i, i) }
	dev := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// What an agent's dev server answers: it never reaches the web port.
		for i, p := range []string{"/api/c/x/events", "/api/c/x/", "/api/c/x", "/api/c/", "/api/c", "/api/", "/api", "/api/conversations"} {
			w.Header().Add("Set-Cookie", fmt.Sprintf("%s=%s; Path=%s; Max-Age=31536000; HttpOnly; SameSite=Strict", web.CookieName, fake(i), p))
			w.Header().Add("Set-Cookie", fmt.Sprintf("%s=%s; Path=%s; Max-Age=31536000; HttpOnly; Secure; SameSite=None; Partitioned", web.CookieName, fake(100+i), p))
		}
		w.Header().Add("Set-Cookie", fmt.Sprintf("%s=%s; Path=/; Max-Age=31536000; HttpOnly; Secure; SameSite=None; Partitioned", web.CookieName, fake(200)))
		fmt.Fprint(w, `<html><body>dev server</body></html>`)
	})}
	go dev.Serve(l)
	t.Cleanup(func() { dev.Close() })

	p := newPage(t, startBrowser(t), "A")
	p.loginList(s)
	status := func(path string) string {
		return `fetch("` + path + `").then(r => { const s = r.status; if (r.body) r.body.cancel(); return s; })`
	}
	// The conversation stream's guard answers 404 once it found the
	// session (there is no conversation x), 401 when it did not.
	check := func(when string) {
		t.Helper()
		if st := eval[int](p, status("/api/conversations")); st != http.StatusOK {
			t.Fatalf("%s: /api/conversations answered %d, want 200 (web-auth refusals logged: %d)", when, st, logs.count(protocol.CodeWebAuth))
		}
		if st := eval[int](p, status("/api/c/x/events")); st != http.StatusNotFound {
			t.Fatalf("%s: /api/c/x/events answered %d, want 404 (web-auth refusals logged: %d)", when, st, logs.count(protocol.CodeWebAuth))
		}
	}
	check("before the dev page")

	p.run("open the agent's dev server page", chromedp.Navigate("http://"+l.Addr().String()+"/"))
	p.until("dev page", `document.body.innerText.includes("dev server")`)
	planted := sessionCookies(t, p, s)
	if len(planted) < 9 {
		t.Fatalf("the browser holds %d cookies named %s after the dev page, want the session's and at least eight planted", len(planted), web.CookieName)
	}
	partitioned := 0
	for _, c := range planted {
		if c.PartitionKey != nil {
			partitioned++
		}
	}
	t.Logf("after the dev page: %d cookies named %s, %d of them partitioned", len(planted), web.CookieName, partitioned)
	p.run("back to the list", chromedp.Navigate(s.base+"/"))
	p.until("list live again, with no new login", `document.querySelector("#conn").textContent === "live"`)
	check("with the planted cookies sent first")
	check("once the answers expired them")
	if got := sessionCookies(t, p, s); len(got) != 1 || got[0].Path != "/" {
		t.Fatalf("after /api/ answers the browser holds %d cookies named %s, want only the session's at /", len(got), web.CookieName)
	}

	// Only planted cookies: refused, saying what to do.
	req, _ := http.NewRequest("GET", s.base+"/api/conversations", nil)
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	req.AddCookie(&http.Cookie{Name: web.CookieName, Value: "planted"})
	req.AddCookie(&http.Cookie{Name: web.CookieName, Value: fake(1)})
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized || !strings.Contains(string(body), "delete this site's cookies") {
		t.Fatalf("a request with two dead cookies of the session's name: %d %s; want 401 naming the cookies to delete", resp.StatusCode, body)
	}
}

// sessionCookies are the browser's cookies of the session's name for the
// server's address, whatever their path.
func sessionCookies(t *testing.T, p *page, s testServer) []*network.Cookie {
	t.Helper()
	ctx, cancel := context.WithTimeout(p.ctx, time.Minute)
	defer cancel()
	all, err := chromedp.Run(ctx, func(ctx context.Context, tg *chromedp.Target) ([]*network.Cookie, error) {
		r, err := cdp.Call(ctx, tg, network.GetCookies, network.GetCookiesParams{URLs: []string{s.base + "/", s.base + "/api/conversations", s.base + "/api/c/x/events"}})
		return r.Cookies, err
	})
	if err != nil {
		t.Fatal(err)
	}
	var out []*network.Cookie
	for _, c := range all {
		if c.Name == web.CookieName {
			out = append(out, c)
		}
	}
	return out
}
