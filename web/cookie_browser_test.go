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
// server the model asks the user to open) can set a cookie of the
// session's name for 127.0.0.1, with a longer path than the session's, so
// that the browser sends it first on every /api/ request. The server
// takes the first live session among the cookies of its name: the list
// stays live with no new login, and the planted cookie is expired by the
// first /api/ answer. A request that carries only such cookies is told to
// delete them, since a new login would not take their place.
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
	dev := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// What an agent's dev server answers: it never reaches the web port.
		w.Header().Add("Set-Cookie", web.CookieName+"=planted; Path=/api; Max-Age=31536000; HttpOnly; SameSite=Strict")
		w.Header().Add("Set-Cookie", web.CookieName+"=planted2; Path=/api/conversations; Max-Age=31536000; HttpOnly; SameSite=Strict")
		fmt.Fprint(w, `<html><body>dev server</body></html>`)
	})}
	go dev.Serve(l)
	t.Cleanup(func() { dev.Close() })

	p := newPage(t, startBrowser(t), "A")
	tok, err := s.store.NewToken()
	if err != nil {
		t.Fatal(err)
	}
	p.run("login", chromedp.Navigate(s.base+"/login?token="+tok))
	p.until("logged in, list live", `location.pathname === "/" && document.querySelector("#conn").textContent === "live"`)
	status := `fetch("/api/conversations").then(r => { const s = r.status; if (r.body) r.body.cancel(); return s; })`

	p.run("open the agent's dev server page", chromedp.Navigate("http://"+l.Addr().String()+"/"))
	p.until("dev page", `document.body.innerText.includes("dev server")`)
	if n := len(sessionCookies(t, p, s)); n != 3 {
		t.Fatalf("the browser holds %d cookies named %s after the dev page, want 3 (the session and two planted)", n, web.CookieName)
	}
	p.run("back to the list", chromedp.Navigate(s.base+"/"))
	p.until("list live again, with no new login", `document.querySelector("#conn").textContent === "live"`)
	if st := eval[int](p, status); st != 200 {
		t.Fatalf("with the planted cookies sent first, /api/conversations answered %d, want 200 (web-auth refusals logged: %d)", st, logs.count(protocol.CodeWebAuth))
	}
	if got := sessionCookies(t, p, s); len(got) != 1 || got[0].Path != "/" {
		t.Fatalf("after /api/ answers the browser holds %d cookies named %s (%v), want only the session's at /", len(got), web.CookieName, got)
	}

	// Only planted cookies: refused, saying what to do.
	req, _ := http.NewRequest("GET", s.base+"/api/conversations", nil)
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	req.AddCookie(&http.Cookie{Name: web.CookieName, Value: "planted"})
	req.AddCookie(&http.Cookie{Name: web.CookieName, Value: "0123456789abcdef.x"})
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
		r, err := cdp.Call(ctx, tg, network.GetCookies, network.GetCookiesParams{URLs: []string{s.base + "/", s.base + "/api/conversations"}})
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
