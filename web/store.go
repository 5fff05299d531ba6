package web

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/mosaic-agents/mosaic/internal/atomicfile"
	"github.com/mosaic-agents/mosaic/internal/xdg"
	"github.com/mosaic-agents/mosaic/protocol"
)

// Lifetimes of what the store issues.
const (
	// TokenTTL bounds how long a login URL works: long enough to paste it
	// into a browser on another machine, short enough that a URL left in
	// a terminal's scrollback is dead.
	TokenTTL = 5 * time.Minute
	// SessionTTL bounds a browser session whatever its use.
	SessionTTL = 30 * 24 * time.Hour
)

// Store keeps login tokens and browser sessions as files under one
// directory, by default $XDG_RUNTIME_DIR/mosaic/web. `mosaicctl web`
// writes tokens and the server redeems them, so the store is the only
// channel between the two processes. The directory is chosen for what the
// engine cannot do: a confined engine sees $XDG_RUNTIME_DIR/mosaic as an
// empty read-only tmpfs, so an agent can neither read a session nor plant
// a token of its own. Only hashes of secrets are written, so a reader of
// the files (a backup, another tool of the user) learns nothing to log in
// with.
type Store struct {
	Dir string
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// Session is one browser session as stored.
type Session struct {
	ID         string    `json:"id"`
	SecretHash string    `json:"secretHash"` // sha256 of the cookie's secret
	CSRF       string    `json:"csrf"`
	Created    time.Time `json:"created"`
	Expires    time.Time `json:"expires"`
	// Agent is the User-Agent of the browser that logged in, shown by
	// `mosaicctl web sessions` so a person can tell sessions apart.
	Agent string `json:"agent"`
	// Addr is the address the login came from (loopback, or the proxy's).
	Addr string `json:"addr"`
}

// DefaultStoreDir returns $XDG_RUNTIME_DIR/mosaic/web.
func DefaultStoreDir() (string, error) {
	rt, err := xdg.RuntimeDir()
	if err != nil {
		return "", fmt.Errorf("%w: the web sessions live under the user's runtime directory", err)
	}
	return filepath.Join(rt, "mosaic", "web"), nil
}

func (s *Store) now() time.Time {
	if s.Now != nil {
		return s.Now()
	}
	return time.Now()
}

func (s *Store) dir(sub string) (string, error) {
	d := filepath.Join(s.Dir, sub)
	if err := os.MkdirAll(d, 0o700); err != nil {
		return "", fmt.Errorf("web store %s: %w", d, err)
	}
	// MkdirAll keeps the mode of a directory that exists: a store made
	// readable by someone else is refused rather than used.
	for _, p := range []string{s.Dir, d} {
		fi, err := os.Lstat(p)
		if err != nil {
			return "", fmt.Errorf("web store %s: %w", p, err)
		}
		if !fi.IsDir() || fi.Mode().Perm()&0o077 != 0 {
			return "", fmt.Errorf("web store %s is not a directory of mode 0700; remove it and run `mosaicctl web` again", p)
		}
	}
	return d, nil
}

func secret() string {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		panic(err) // crypto/rand never fails on Linux ≥ 3.17
	}
	return hex.EncodeToString(b)
}

func digest(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])
}

// NewToken issues a one-time login token valid for TokenTTL.
func (s *Store) NewToken() (string, error) {
	d, err := s.dir("tokens")
	if err != nil {
		return "", err
	}
	tok := secret()
	exp := s.now().Add(TokenTTL).UTC().Format(time.RFC3339Nano)
	if err := atomicfile.Write(filepath.Join(d, digest(tok)), []byte(exp+"\n"), 0o600); err != nil {
		return "", fmt.Errorf("write login token: %w", err)
	}
	return tok, nil
}

// Redeem exchanges a login token for a new session and returns it with
// the cookie value. The token file is removed before anything else: of two
// requests with the same token only the one whose remove succeeded gets a
// session, so a replayed token is refused even in a race.
func (s *Store) Redeem(token, agent, addr string) (*Session, string, error) {
	if len(token) != 64 || strings.Trim(token, "0123456789abcdef") != "" {
		return nil, "", protocol.Refuse(protocol.CodeWebToken, "this login link is malformed; run `mosaicctl web` for a new one")
	}
	d, err := s.dir("tokens")
	if err != nil {
		return nil, "", err
	}
	p := filepath.Join(d, digest(token))
	data, err := os.ReadFile(p)
	if err == nil {
		err = os.Remove(p)
	}
	if err != nil {
		return nil, "", protocol.Refuse(protocol.CodeWebToken, "this login link was already used or never issued; run `mosaicctl web` for a new one")
	}
	exp, err := time.Parse(time.RFC3339Nano, strings.TrimSpace(string(data)))
	if err != nil || !s.now().Before(exp) {
		return nil, "", protocol.Refuse(protocol.CodeWebToken, "this login link expired (links work for %s); run `mosaicctl web` for a new one", TokenTTL)
	}
	sd, err := s.dir("sessions")
	if err != nil {
		return nil, "", err
	}
	sec := secret()
	now := s.now().UTC()
	ss := &Session{ID: secret()[:16], SecretHash: digest(sec), CSRF: secret(), Created: now,
		Expires: now.Add(SessionTTL), Agent: clip(agent, 200), Addr: addr}
	data, err = json.Marshal(ss)
	if err != nil {
		return nil, "", err
	}
	if err := atomicfile.Write(filepath.Join(sd, ss.ID+".json"), data, 0o600); err != nil {
		return nil, "", fmt.Errorf("write session: %w", err)
	}
	return ss, ss.ID + "." + sec, nil
}

// Check returns the live session a cookie value names. Every request
// reads the session's file, so a revoke takes effect at the next request.
func (s *Store) Check(cookie string) (*Session, error) {
	id, sec, ok := strings.Cut(cookie, ".")
	if !ok || !validID(id) {
		return nil, protocol.Refuse(protocol.CodeWebAuth, "not logged in: run `mosaicctl web` and open the link it prints")
	}
	ss, err := s.load(id)
	if err != nil {
		return nil, protocol.Refuse(protocol.CodeWebAuth, "this browser session is not known (revoked, expired or from before a logout); run `mosaicctl web` to log in again")
	}
	if subtle.ConstantTimeCompare([]byte(digest(sec)), []byte(ss.SecretHash)) != 1 {
		return nil, protocol.Refuse(protocol.CodeWebAuth, "this browser session's cookie does not match; run `mosaicctl web` to log in again")
	}
	if !s.now().Before(ss.Expires) {
		return nil, protocol.Refuse(protocol.CodeWebAuth, "this browser session expired; run `mosaicctl web` to log in again")
	}
	return ss, nil
}

func validID(id string) bool {
	return len(id) == 16 && strings.Trim(id, "0123456789abcdef") == ""
}

func (s *Store) load(id string) (*Session, error) {
	d, err := s.dir("sessions")
	if err != nil {
		return nil, err
	}
	data, err := os.ReadFile(filepath.Join(d, id+".json"))
	if err != nil {
		return nil, err
	}
	var ss Session
	if err := json.Unmarshal(data, &ss); err != nil {
		return nil, fmt.Errorf("session %s: %w", id, err)
	}
	return &ss, nil
}

// Sessions lists the stored sessions, oldest first. Expired ones are
// removed on the way.
func (s *Store) Sessions() ([]Session, error) {
	d, err := s.dir("sessions")
	if err != nil {
		return nil, err
	}
	ents, err := os.ReadDir(d)
	if err != nil {
		return nil, err
	}
	var out []Session
	for _, e := range ents {
		id, ok := strings.CutSuffix(e.Name(), ".json")
		if !ok || !validID(id) {
			continue
		}
		ss, err := s.load(id)
		if err != nil {
			continue
		}
		if !s.now().Before(ss.Expires) {
			os.Remove(filepath.Join(d, e.Name()))
			continue
		}
		out = append(out, *ss)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Created.Before(out[j].Created) })
	return out, nil
}

// ErrNoSession is returned by Revoke for an id that names no session.
var ErrNoSession = errors.New("no such web session")

// Revoke removes session id (or every session for "all"). The server
// refuses its cookie from the next request on and closes its live streams
// within a heartbeat.
func (s *Store) Revoke(id string) (int, error) {
	list, err := s.Sessions()
	if err != nil {
		return 0, err
	}
	d, _ := s.dir("sessions")
	n := 0
	for _, ss := range list {
		if id != "all" && ss.ID != id {
			continue
		}
		if err := os.Remove(filepath.Join(d, ss.ID+".json")); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return n, fmt.Errorf("revoke web session %s: %w", ss.ID, err)
		}
		n++
	}
	if n == 0 && id != "all" {
		return 0, fmt.Errorf("%w: %s (`mosaicctl web sessions` lists them)", ErrNoSession, id)
	}
	return n, nil
}

func clip(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}
