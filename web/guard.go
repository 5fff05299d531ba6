package web

import (
	"crypto/subtle"
	"errors"
	"net/http"
	"slices"
	"strings"

	"github.com/mosaic-agents/mosaic/protocol"
)

// CookieName is the session cookie.
const CookieName = "mosaic_session"

// CSRFHeader carries the session's CSRF token on every state change.
const CSRFHeader = "X-Mosaic-CSRF"

// headers are set on every answer. The CSP allows no inline script or
// style and no other origin: even text that slipped past the renderer
// into markup could not run. Nothing is cached, so a shared machine's
// disk holds no transcript.
func headers(w http.ResponseWriter) {
	h := w.Header()
	h.Set("Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "+
		"connect-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Cross-Origin-Opener-Policy", "same-origin")
	h.Set("Cross-Origin-Resource-Policy", "same-origin")
}

// checkHost refuses a Host the server does not answer to. A DNS-rebinding
// page reaches 127.0.0.1 under its own name; its requests carry that name
// as Host and end here, before any cookie is looked at.
func (s *Server) checkHost(r *http.Request) error {
	if slices.Contains(s.hosts, r.Host) {
		return nil
	}
	return protocol.Refuse(protocol.CodeWebHost, "this server does not answer to host %q; open it as http://%s/ (or add the name with --allow-host)", r.Host, s.primary())
}

// checkOrigin refuses a state change whose Origin is not this server's own
// page: a cross-site form or fetch carries the other site's Origin (or
// "null"), and SameSite=Strict is the second wall, not the only one. A
// browser sends Origin on every POST; a request without one did not come
// from our page.
func (s *Server) checkOrigin(r *http.Request) error {
	o := r.Header.Get("Origin")
	if o == "http://"+r.Host || o == "https://"+r.Host {
		return nil
	}
	if o == "" {
		return protocol.Refuse(protocol.CodeWebOrigin, "a state change without an Origin header is refused; use the page")
	}
	return protocol.Refuse(protocol.CodeWebOrigin, "a state change from origin %q is refused: only this server's own pages may act", clip(o, 100))
}

// checkFetchSite refuses a request with a session that another page made
// the browser send. A page on another loopback port (a dev server the
// agent runs, opened by the user) is same-site with this one — a site is
// a scheme and a host, not a port — so SameSite=Strict sends the cookie
// with its fetches, and its streams would take the user's tabs. The
// browser says who caused a request in Sec-Fetch-Site, which no page can
// set: same-origin for this server's own page, none for what the user
// typed or opened from a link outside any page (the login link, a
// bookmark). A request without the header comes from a browser older
// than 2023 or from no browser: it may load a page (which does nothing
// without its script's later requests) but opens no stream and changes
// nothing.
func checkFetchSite(r *http.Request) error {
	switch site := r.Header.Get("Sec-Fetch-Site"); site {
	case "same-origin", "none":
		return nil
	case "":
		if !strings.HasPrefix(r.URL.Path, "/api/") {
			return nil
		}
		return protocol.Refuse(protocol.CodeWebFetchSite, "a request without a Sec-Fetch-Site header is refused: use the page in a current browser (every major browser has sent it since 2023)")
	default:
		return protocol.Refuse(protocol.CodeWebFetchSite, "a request another page made the browser send (Sec-Fetch-Site: %s) is refused: only this server's own pages may read or act; open http://%s/ yourself", clip(site, 20), r.Host)
	}
}

// checkCSRF compares the request's CSRF header with the session's token.
func checkCSRF(r *http.Request, ss *Session) error {
	got := r.Header.Get(CSRFHeader)
	if got == "" || subtle.ConstantTimeCompare([]byte(got), []byte(ss.CSRF)) != 1 {
		return protocol.Refuse(protocol.CodeWebCSRF, "the request's CSRF token is missing or wrong; reload the page")
	}
	return nil
}

// maxSessionCookies bounds the well-formed cookies of our name a request
// is judged by: each costs a read of the session store. A browser keeps
// at most 180 cookies for a host, and as many again in a partition.
const maxSessionCookies = 512

// session returns the request's live session and how many cookies of its
// name the request carried. Cookies are not kept apart by port: a page
// served on another port of this host (a dev server an engine's tool
// runs, opened by the user) can set cookies of our name, with longer
// paths so that the browser sends them first, and partitioned ones
// (CHIPS: their partition is the top-level site, any port of this host)
// beside them. Every cookie of the name counts, and the first live one is
// the session, whatever came before it; one that is not well formed
// costs no read. With none, a request that carried several is told how
// to clear them.
func (s *Server) session(r *http.Request) (*Session, int, error) {
	cs := r.CookiesNamed(CookieName)
	var first error
	checked := 0
	for _, c := range cs {
		if !wellFormed(c.Value) {
			continue
		}
		if checked++; checked > maxSessionCookies {
			break
		}
		ss, err := s.store.Check(c.Value)
		if err == nil {
			return ss, len(cs), nil
		}
		if first == nil {
			first = err
		}
	}
	switch {
	case len(cs) == 0:
		return nil, 0, protocol.Refuse(protocol.CodeWebAuth, "not logged in: run `mosaicctl web` and open the link it prints")
	case len(cs) > 1:
		return nil, len(cs), protocol.Refuse(protocol.CodeWebAuth, "this request carried %d cookies named %s and none is a live session "+
			"(a page served on another port of this host, such as a dev server, can set one): "+
			"delete this site's cookies in the browser, then run `mosaicctl web` and open the link it prints", len(cs), CookieName)
	case first == nil:
		return nil, 1, protocol.Refuse(protocol.CodeWebAuth, "not logged in: run `mosaicctl web` and open the link it prints")
	}
	return nil, 1, first
}

// wellFormed says whether a cookie value has the form of the ones
// Store.Redeem makes: a session id and a secret, in lowercase hex.
func wellFormed(v string) bool {
	id, sec, ok := strings.Cut(v, ".")
	return ok && validID(id) && len(sec) == 64 && strings.Trim(sec, "0123456789abcdef") == ""
}

// dropShadows expires, for a request that carried more than one cookie of
// the session's name, each other one the browser could have sent it: one
// set by another port's page lies at one of the request path's prefixes,
// unpartitioned or partitioned, and an expired cookie of the same name,
// path and partition replaces it. The session's own cookie, unpartitioned
// at "/", is never among them; a partitioned one at "/" is.
func dropShadows(w http.ResponseWriter, r *http.Request) {
	expire := func(path string, partitioned bool) {
		c := &http.Cookie{Name: CookieName, Value: "", Path: path, HttpOnly: true, MaxAge: -1, SameSite: http.SameSiteStrictMode}
		if partitioned {
			c.Secure, c.SameSite, c.Partitioned = true, http.SameSiteNoneMode, true
		}
		http.SetCookie(w, c)
	}
	p := r.URL.Path
	for n := 0; n < 32 && len(p) > 1; n++ {
		expire(p, false)
		expire(p, true)
		if strings.HasSuffix(p, "/") {
			p = strings.TrimSuffix(p, "/")
		} else {
			p = p[:strings.LastIndexByte(p, '/')+1]
		}
	}
	expire("/", true)
}

// guard runs the checks every route needs, in order: Host, then the
// session, then Sec-Fetch-Site, then — for anything but GET and HEAD — Origin and CSRF.
func (s *Server) guard(w http.ResponseWriter, r *http.Request) (*Session, bool) {
	if err := s.checkHost(r); err != nil {
		s.refuse(w, r, http.StatusMisdirectedRequest, err)
		return nil, false
	}
	ss, cookies, err := s.session(r)
	if cookies > 1 {
		// Live or not, the others go: once the user logs in again, they
		// are not in front of the new session's cookie.
		dropShadows(w, r)
	}
	if err != nil {
		s.refuse(w, r, http.StatusUnauthorized, err)
		return nil, false
	}
	if err := checkFetchSite(r); err != nil {
		s.refuse(w, r, http.StatusForbidden, err)
		return nil, false
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		if err := s.checkOrigin(r); err != nil {
			s.refuse(w, r, http.StatusForbidden, err)
			return nil, false
		}
		if err := checkCSRF(r, ss); err != nil {
			s.refuse(w, r, http.StatusForbidden, err)
			return nil, false
		}
	}
	return ss, true
}

// refuse answers with a refusal: JSON for the API, a small text page for
// a person's navigation.
func (s *Server) refuse(w http.ResponseWriter, r *http.Request, status int, err error) {
	var ref *protocol.Refusal
	if !errors.As(err, &ref) {
		ref = &protocol.Refusal{Code: protocol.CodeServeFailed, Message: err.Error()}
	}
	if st, ok := r.Context().Value(reqKey{}).(*reqState); ok {
		st.refused = true
	}
	s.logRefusal(r, ref)
	// Nothing more is read from a refused connection: its sender keeps no
	// descriptor of ours waiting for its next request.
	w.Header().Set("Connection", "close")
	writeJSON(w, status, map[string]any{"refusal": map[string]any{"code": ref.Code, "message": ref.Message, "reconcile": ref.Reconcile}})
}
