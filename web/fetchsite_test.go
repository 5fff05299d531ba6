package web_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/mosaic-agents/mosaic/protocol"
	"github.com/mosaic-agents/mosaic/web"
)

// TestWebFetchSite: a request with the session's cookie that another page
// made the browser send — same-site (another loopback port), cross-site,
// or with no Sec-Fetch-Site at all on the API — is refused web-fetch-site
// before it reaches a stream or a command; the page's own requests
// (same-origin) and what the user opens (none) pass, and a page load
// without the header (an old browser) still gets the page.
func TestWebFetchSite(t *testing.T) {
	s := startServer(t, noConversations)
	c := browser(t)
	csrf := s.login(t, c)
	do := func(method, path, site string) *http.Response {
		t.Helper()
		req, _ := http.NewRequest(method, s.base+path, strings.NewReader(`{"tab":"x","op":"takeover","generation":1}`))
		req.Header.Set("Sec-Fetch-Site", site)
		if method == "POST" {
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Origin", s.base)
			req.Header.Set(web.CSRFHeader, csrf)
		}
		r, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	const stream, cmd = "/api/c/pi-00000000000000000000/events", "/api/c/pi-00000000000000000000/command"
	for _, tc := range []struct {
		method, path, site string
		refused            bool
	}{
		{"GET", stream, "same-site", true},
		{"GET", stream, "cross-site", true},
		{"GET", stream, "-", true},
		{"GET", "/api/conversations", "same-site", true},
		{"GET", "/api/conversations", "-", true},
		{"POST", cmd, "same-site", true},
		{"POST", cmd, "-", true},
		{"GET", "/", "same-site", true},
		{"GET", "/", "none", false},
		{"GET", "/", "same-origin", false},
		{"GET", "/", "-", false},
		{"POST", cmd, "same-origin", false},
	} {
		t.Run(tc.method+" "+tc.path+" "+tc.site, func(t *testing.T) {
			got := refusal(t, do(tc.method, tc.path, tc.site))
			if tc.refused != (got == protocol.CodeWebFetchSite) {
				t.Fatalf("refused %q; want web-fetch-site: %v", got, tc.refused)
			}
		})
	}
}
