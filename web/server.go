package web

import (
	"context"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"log"
	"net"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/mosaic-agents/mosaic/activation"
	"github.com/mosaic-agents/mosaic/audit"
	"github.com/mosaic-agents/mosaic/conversations"
	"github.com/mosaic-agents/mosaic/units"
)

//go:embed static
var static embed.FS

// Options configure a Server.
type Options struct {
	// Store holds the login tokens and sessions.
	Store *Store
	// Hosts are the Host values the server answers to besides the
	// loopback names of its TCP listeners (AddListenerHosts), e.g. the
	// name a tailnet proxy forwards.
	Hosts []string
	// Idle is how long the server runs with no browser attached before
	// Serve returns (0: never). Socket activation starts it again.
	Idle time.Duration
	// Socket returns the conversation socket to dial for an id; nil means
	// units.SocketPath, starting the conversation's socket unit when it
	// is registered and not started (as `mosaicctl attach` does).
	Socket func(ctx context.Context, id string) (string, error)
	// Conversations lists the registered conversations; nil reads the
	// conversation store.
	Conversations func() ([]*conversations.Conversation, error)
	// Log receives one line per connection change, and per refusal when
	// Audit is nil.
	Log *log.Logger
	// Audit receives the refusals as structured journal entries
	// (MOSAIC_REFUSAL=, the catalog's MESSAGE_ID), counted per code as
	// the controller's are (refuselog.go).
	Audit *audit.Logger
	// TabGrace is how long a tab's connection outlives its stream (0:
	// TabGrace).
	TabGrace time.Duration
}

// Server is the web surface: one more client of the conversation sockets.
type Server struct {
	store  *Store
	judge  *activation.Judge
	hosts  []string
	opts   Options
	pages  *template.Template
	tabs   *tabs
	list   *lister
	mu     sync.Mutex
	active int // requests in flight, streams included
	last   time.Time
	ctx    context.Context
	// judging holds a token per judgement running (checkPeer).
	judging chan struct{}
	// refusals counts repeated refusals (refuselog.go).
	refusals *audit.Logger
}

// New returns a server; AddListenerHosts then names the listeners' hosts.
func New(ctx context.Context, o Options) (*Server, error) {
	if o.Store == nil {
		return nil, errors.New("web: no session store")
	}
	pages, err := template.ParseFS(static, "static/*.html")
	if err != nil {
		return nil, fmt.Errorf("web: parse pages: %w", err)
	}
	judge, err := activation.NewJudge()
	if err != nil {
		return nil, fmt.Errorf("web: %w", err)
	}
	s := &Server{store: o.Store, judge: judge, hosts: append([]string(nil), o.Hosts...), opts: o, pages: pages, last: time.Now(), ctx: ctx,
		judging: make(chan struct{}, maxJudging)}
	switch {
	case o.Audit != nil:
		s.refusals = o.Audit
	case o.Log != nil:
		s.refusals = audit.NewWriter("web", o.Log.Writer())
	}
	s.tabs = newTabs(s)
	s.list = newLister(s)
	return s, nil
}

// AddListenerHosts adds the Host values a browser uses for l: for a
// loopback TCP listener its address (127.0.0.1:PORT, [::1]:PORT), and
// localhost:PORT once the server holds both on that port (or listens on
// every address). A browser tries ::1 first for localhost: where the
// server did not hold [::1]:PORT, any process (an engine's tool) could
// listen there and serve a page of its own under the name the server
// answered to. A Unix socket (behind a reverse proxy) adds nothing: its
// names come from Options.Hosts.
func (s *Server) AddListenerHosts(l net.Listener) {
	a, ok := l.Addr().(*net.TCPAddr)
	if !ok {
		return
	}
	port := fmt.Sprint(a.Port)
	switch {
	case a.IP.IsUnspecified():
		s.addHosts("127.0.0.1:"+port, "[::1]:"+port, "localhost:"+port)
	case a.IP.IsLoopback() && a.IP.To4() != nil:
		s.addHosts("127.0.0.1:" + port)
	case a.IP.IsLoopback():
		s.addHosts("[::1]:" + port)
	default:
		s.addHosts(l.Addr().String())
	}
	if slices.Contains(s.hosts, "127.0.0.1:"+port) && slices.Contains(s.hosts, "[::1]:"+port) {
		s.addHosts("localhost:" + port)
	}
}

func (s *Server) addHosts(hosts ...string) {
	for _, h := range hosts {
		if !slices.Contains(s.hosts, h) {
			s.hosts = append(s.hosts, h)
		}
	}
}

func (s *Server) primary() string {
	if len(s.hosts) > 0 {
		return s.hosts[0]
	}
	return "127.0.0.1"
}

func (s *Server) grace() time.Duration {
	if s.opts.TabGrace > 0 {
		return s.opts.TabGrace
	}
	return TabGrace
}

func (s *Server) logf(format string, args ...any) {
	if s.opts.Log != nil {
		s.opts.Log.Printf(format, args...)
	}
}

// Handler returns the server's routes.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /login", s.login)
	mux.HandleFunc("POST /logout", s.logout)
	mux.HandleFunc("GET /{$}", s.page("list.html"))
	mux.HandleFunc("GET /c/{id}", s.page("conv.html"))
	mux.HandleFunc("GET /api/conversations", s.listStream)
	mux.HandleFunc("GET /api/c/{id}/events", s.convStream)
	mux.HandleFunc("POST /api/c/{id}/command", s.command)
	sub, _ := fs.Sub(static, "static")
	files := http.FileServerFS(sub)
	mux.HandleFunc("GET /static/", func(w http.ResponseWriter, r *http.Request) {
		if err := s.checkHost(r); err != nil {
			s.refuse(w, r, http.StatusMisdirectedRequest, err)
			return
		}
		if strings.HasSuffix(r.URL.Path, ".html") {
			http.NotFound(w, r)
			return
		}
		http.StripPrefix("/static/", files).ServeHTTP(w, r)
	})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		st := &reqState{}
		r = r.WithContext(context.WithValue(r.Context(), reqKey{}, st))
		s.enter()
		defer func() { s.leave(!st.refused) }()
		headers(w)
		if err := s.checkPeer(r, judgeWait); err != nil {
			s.refuse(w, r, peerStatus(err), err)
			return
		}
		mux.ServeHTTP(w, r)
	})
}

func (s *Server) enter() {
	s.mu.Lock()
	s.active++
	s.mu.Unlock()
}

// leave ends a request; a served one counts as activity, a refused one
// does not (a process that only gets refusals must not keep the server
// from idling out).
func (s *Server) leave(served bool) {
	s.mu.Lock()
	s.active--
	if served {
		s.last = time.Now()
	}
	s.mu.Unlock()
}

// reqKey holds a request's *reqState in its context.
type reqKey struct{}

// reqState is what the handlers learn of a request as it goes.
type reqState struct{ refused bool }

// idle reports whether nothing is attached and nothing was for Idle.
func (s *Server) idle() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.active == 0 && s.tabs.count() == 0 && time.Since(s.last) >= s.opts.Idle
}

// idleConn is how long a kept-alive connection waits for its next request.
const idleConn = 2 * time.Minute

// Serve serves on every listener until ctx ends or the server has been
// idle for Options.Idle. It then closes every conversation connection.
func (s *Server) Serve(ctx context.Context, ls ...net.Listener) error {
	// A browser's kept-alive connection is closed after idleConn with no
	// request (it opens another); refused requests close theirs (refuse).
	srv := &http.Server{Handler: s.Handler(), ReadHeaderTimeout: 10 * time.Second, IdleTimeout: idleConn,
		BaseContext: func(net.Listener) context.Context { return ctx },
		ConnContext: withConn}
	errs := make(chan error, len(ls))
	for _, l := range ls {
		go func() { errs <- srv.Serve(s.capped(l)) }()
	}
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	var err error
loop:
	for {
		select {
		case <-ctx.Done():
			break loop
		case err = <-errs:
			break loop
		case <-tick.C:
			if s.opts.Idle > 0 && s.idle() {
				s.logf("idle for %s with no browser attached: exiting", s.opts.Idle)
				break loop
			}
		}
	}
	shut, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	srv.Shutdown(shut)
	s.tabs.closeAll()
	if s.refusals != nil {
		s.refusals.Flush()
	}
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	return err
}

func (s *Server) login(w http.ResponseWriter, r *http.Request) {
	if err := s.checkHost(r); err != nil {
		s.refuse(w, r, http.StatusMisdirectedRequest, err)
		return
	}
	ss, cookie, err := s.store.Redeem(r.URL.Query().Get("token"), r.UserAgent(), r.RemoteAddr)
	if err != nil {
		s.refuse(w, r, http.StatusUnauthorized, err)
		return
	}
	s.logf("login: session %s from %s", ss.ID, r.RemoteAddr)
	http.SetCookie(w, &http.Cookie{Name: CookieName, Value: cookie, Path: "/", HttpOnly: true,
		SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil || r.Header.Get("X-Forwarded-Proto") == "https",
		Expires: ss.Expires})
	// Off the URL that carried the token at once, so it is not left in
	// the address bar.
	http.Redirect(w, r, "/", http.StatusSeeOther)
}

func (s *Server) logout(w http.ResponseWriter, r *http.Request) {
	ss, ok := s.guard(w, r)
	if !ok {
		return
	}
	s.store.Revoke(ss.ID)
	s.tabs.closeSession(ss.ID)
	http.SetCookie(w, &http.Cookie{Name: CookieName, Value: "", Path: "/", HttpOnly: true, SameSite: http.SameSiteStrictMode, MaxAge: -1})
	writeJSON(w, http.StatusOK, map[string]any{"ok": true})
}

// page serves one of the two pages. The CSRF token goes into a meta tag
// that only same-origin script can read.
func (s *Server) page(name string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		ss, ok := s.guard(w, r)
		if !ok {
			return
		}
		id := r.PathValue("id")
		if id != "" && !conversations.ValidID(id) {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		s.pages.ExecuteTemplate(w, name, map[string]string{"CSRF": ss.CSRF, "ID": id})
	}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}

// socket returns the conversation socket for id.
func (s *Server) socket(ctx context.Context, id string) (string, error) {
	if s.opts.Socket != nil {
		return s.opts.Socket(ctx, id)
	}
	path, err := units.SocketPath(id)
	if err != nil {
		return "", err
	}
	if _, err := os.Stat(path); !errors.Is(err, fs.ErrNotExist) {
		return path, nil
	}
	// A registered conversation whose socket unit is not started: start
	// it, as `mosaicctl attach` does; connecting then activates the
	// controller. An unregistered id starts nothing.
	if _, err := s.conversation(id); err != nil {
		return "", err
	}
	return path, units.StartSocket(ctx, id)
}
