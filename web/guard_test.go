package web_test

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/mosaic-agents/mosaic/conversations"
	"github.com/mosaic-agents/mosaic/protocol"
	"github.com/mosaic-agents/mosaic/web"
)

// testServer runs a server on a loopback port with a store of its own.
type testServer struct {
	base  string // http://127.0.0.1:PORT
	store *web.Store
}

func startServer(t *testing.T, o web.Options) testServer {
	t.Helper()
	srv, l, s := newServer(t, o)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { srv.Serve(ctx, l); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return s
}

// newServer makes a server with a store of its own and its loopback
// listener, not yet serving.
func newServer(t *testing.T, o web.Options) (*web.Server, net.Listener, testServer) {
	t.Helper()
	o.Store = &web.Store{Dir: t.TempDir() + "/web"}
	srv, err := web.New(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv.AddListenerHosts(l)
	return srv, l, testServer{base: "http://" + l.Addr().String(), store: o.Store}
}

// noConversations is a server with no conversations: the refusals come
// before any socket is dialled.
var noConversations = web.Options{Conversations: func() ([]*conversations.Conversation, error) { return nil, nil }}

// browser is an HTTP client with a cookie jar that does not follow
// redirects, so each answer is seen as sent.
func browser(t *testing.T) *http.Client {
	t.Helper()
	jar, _ := cookiejar.New(nil)
	return &http.Client{Jar: jar, Transport: sameOrigin{}, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

// sameOrigin sends Sec-Fetch-Site: same-origin, as a browser does for the
// page's own requests, unless the request sets it (to "-": none at all).
type sameOrigin struct{}

func (sameOrigin) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	switch r.Header.Get("Sec-Fetch-Site") {
	case "":
		r.Header.Set("Sec-Fetch-Site", "same-origin")
	case "-":
		r.Header.Del("Sec-Fetch-Site")
	}
	return http.DefaultTransport.RoundTrip(r)
}

// login redeems a fresh token and returns the session's CSRF token, read
// from the page as a script of the page would.
func (s testServer) login(t *testing.T, c *http.Client) string {
	t.Helper()
	tok, err := s.store.NewToken()
	if err != nil {
		t.Fatal(err)
	}
	r, err := c.Get(s.base + "/login?token=" + tok)
	if err != nil {
		t.Fatal(err)
	}
	r.Body.Close()
	if r.StatusCode != http.StatusSeeOther {
		t.Fatalf("login: %s", r.Status)
	}
	r, err = c.Get(s.base + "/")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(r.Body)
	r.Body.Close()
	m := regexp.MustCompile(`name="csrf" content="([0-9a-f]+)"`).FindSubmatch(body)
	if r.StatusCode != http.StatusOK || m == nil {
		t.Fatalf("list page after login: %s %q", r.Status, body)
	}
	return string(m[1])
}

// refusal returns the code of a refused answer, "" when not refused.
func refusal(t *testing.T, r *http.Response) string {
	t.Helper()
	defer r.Body.Close()
	var j struct {
		Refusal *struct{ Code string } `json:"refusal"`
	}
	json.NewDecoder(r.Body).Decode(&j)
	if j.Refusal == nil {
		return ""
	}
	return j.Refusal.Code
}

// TestWebRefusals: every request without what it needs is refused with
// its code before it reaches a conversation: no cookie, a wrong or
// replayed or expired token, a foreign Host (DNS rebinding), a
// cross-origin or Origin-less state change, a missing CSRF token, a
// revoked session, a tab of another session.
func TestWebRefusals(t *testing.T) {
	s := startServer(t, noConversations)
	c := browser(t)
	csrf := s.login(t, c)
	u, _ := url.Parse(s.base)
	cmd := s.base + "/api/c/pi-00000000000000000000/command"
	post := func(c *http.Client, origin, csrf, host string) *http.Response {
		req, _ := http.NewRequest("POST", cmd, strings.NewReader(`{"tab":"x","op":"takeover","generation":1}`))
		req.Header.Set("Content-Type", "application/json")
		if origin != "" {
			req.Header.Set("Origin", origin)
		}
		if csrf != "" {
			req.Header.Set(web.CSRFHeader, csrf)
		}
		if host != "" {
			req.Host = host
		}
		r, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	get := func(c *http.Client, path, host string) *http.Response {
		req, _ := http.NewRequest("GET", s.base+path, nil)
		if host != "" {
			req.Host = host
		}
		r, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	used, _ := s.store.NewToken()
	get(browser(t), "/login?token="+used, "").Body.Close()

	cases := []struct {
		name string
		do   func() *http.Response
		want string
	}{
		{"no cookie", func() *http.Response { return get(browser(t), "/", "") }, protocol.CodeWebAuth},
		{"no cookie on the event stream", func() *http.Response { return get(browser(t), "/api/conversations", "") }, protocol.CodeWebAuth},
		{"wrong token", func() *http.Response { return get(browser(t), "/login?token="+strings.Repeat("ab", 32), "") }, protocol.CodeWebToken},
		{"malformed token", func() *http.Response { return get(browser(t), "/login?token=../../x", "") }, protocol.CodeWebToken},
		{"replayed token", func() *http.Response { return get(browser(t), "/login?token="+used, "") }, protocol.CodeWebToken},
		{"wrong host", func() *http.Response { return get(c, "/", "evil.example:"+u.Port()) }, protocol.CodeWebHost},
		{"wrong host at login", func() *http.Response { return get(browser(t), "/login?token="+used, "evil.example") }, protocol.CodeWebHost},
		// Only 127.0.0.1 is held here: localhost's first address, ::1, is
		// anyone's to listen on.
		{"localhost where ::1 is not held", func() *http.Response { return get(c, "/", "localhost:"+u.Port()) }, protocol.CodeWebHost},
		{"::1 where it is not held", func() *http.Response { return get(c, "/", "[::1]:"+u.Port()) }, protocol.CodeWebHost},
		{"cross-origin post", func() *http.Response { return post(c, "http://evil.example", csrf, "") }, protocol.CodeWebOrigin},
		{"null origin post", func() *http.Response { return post(c, "null", csrf, "") }, protocol.CodeWebOrigin},
		{"post without origin", func() *http.Response { return post(c, "", csrf, "") }, protocol.CodeWebOrigin},
		{"post without csrf", func() *http.Response { return post(c, s.base, "", "") }, protocol.CodeWebCSRF},
		{"post with a wrong csrf", func() *http.Response { return post(c, s.base, strings.Repeat("0", 64), "") }, protocol.CodeWebCSRF},
		{"post without cookie", func() *http.Response { return post(browser(t), s.base, csrf, "") }, protocol.CodeWebAuth},
		{"another session's tab", func() *http.Response { return post(c, s.base, csrf, "") }, protocol.CodeWebTab},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := refusal(t, tc.do()); got != tc.want {
				t.Fatalf("refused %q, want %q", got, tc.want)
			}
		})
	}

	t.Run("revoked session", func(t *testing.T) {
		list, err := s.store.Sessions()
		if err != nil || len(list) != 2 {
			t.Fatalf("sessions %v %v, want the two logins", list, err)
		}
		for _, ss := range list {
			if _, err := s.store.Revoke(ss.ID); err != nil {
				t.Fatal(err)
			}
		}
		if got := refusal(t, get(c, "/", "")); got != protocol.CodeWebAuth {
			t.Fatalf("refused %q, want %q", got, protocol.CodeWebAuth)
		}
	})
}

// TestWebCookie: the session cookie is HttpOnly and SameSite=Strict, the
// token leaves the address bar at once, and every answer carries the
// headers that keep the page from running or framing anything foreign.
func TestWebCookie(t *testing.T) {
	s := startServer(t, noConversations)
	tok, _ := s.store.NewToken()
	r, err := browser(t).Get(s.base + "/login?token=" + tok)
	if err != nil {
		t.Fatal(err)
	}
	r.Body.Close()
	sc := r.Header.Get("Set-Cookie")
	for _, want := range []string{web.CookieName + "=", "HttpOnly", "SameSite=Strict", "Path=/"} {
		if !strings.Contains(sc, want) {
			t.Errorf("Set-Cookie %q lacks %q", sc, want)
		}
	}
	if loc := r.Header.Get("Location"); loc != "/" {
		t.Errorf("login redirects to %q, want /", loc)
	}
	csp := r.Header.Get("Content-Security-Policy")
	for _, want := range []string{"default-src 'none'", "script-src 'self'", "frame-ancestors 'none'"} {
		if !strings.Contains(csp, want) {
			t.Errorf("CSP %q lacks %q", csp, want)
		}
	}
	if r.Header.Get("Referrer-Policy") != "no-referrer" {
		t.Errorf("Referrer-Policy %q", r.Header.Get("Referrer-Policy"))
	}
}
