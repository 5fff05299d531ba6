package web_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/mosaic-agents/mosaic/contrib/sandboxtest"
	"github.com/mosaic-agents/mosaic/protocol"
)

// TestBrowserSameSitePageRefused (Chromium): a page served on another
// loopback port (a dev server the agent runs, which the user opens) is
// same-site with the web port, so the browser sends its fetches with the
// session cookie, from the user's own browser (the peer passes). They are
// refused web-fetch-site and none reaches a conversation; on a server that
// does not check Sec-Fetch-Site they open controller connections.
func TestBrowserSameSitePageRefused(t *testing.T) {
	sandboxtest.Require(t)
	var dialled atomic.Int32
	var logs logLines
	o := noConversations
	o.Log = log.New(io.MultiWriter(&logs, testWriter{t}), "server: ", 0)
	o.Socket = func(ctx context.Context, id string) (string, error) {
		dialled.Add(1)
		return "", errors.New("the request reached the conversation dial")
	}
	s := startServer(t, o)
	l, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dev := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, `<html><body>dev server<script>
for (let i = 0; i < 5; i++) fetch(%q + "/api/c/pi-0000000000000000000" + i + "/events", {credentials: "include", mode: "no-cors"}).catch(()=>{});
</script></body></html>`, s.base)
	})}
	go dev.Serve(l)
	t.Cleanup(func() { dev.Close() })
	p := newPage(t, startBrowser(t), "A")
	tok, err := s.store.NewToken()
	if err != nil {
		t.Fatal(err)
	}
	p.run("login", chromedp.Navigate(s.base+"/login?token="+tok))
	p.until("logged in", `location.pathname === "/"`)
	p.run("open the dev server's page", chromedp.Navigate("http://"+l.Addr().String()+"/"))
	p.until("dev page", `document.body.innerText.includes("dev server")`)
	for i := 0; i < 200 && logs.count(protocol.CodeWebFetchSite)+int(dialled.Load()) < 5; i++ {
		time.Sleep(50 * time.Millisecond)
	}
	if n := dialled.Load(); n != 0 {
		t.Fatalf("%d requests from the other port's page reached the conversation dial", n)
	}
	if n := logs.count(protocol.CodeWebFetchSite); n < 5 {
		t.Fatalf("%d of the page's 5 requests were refused web-fetch-site", n)
	}
}
