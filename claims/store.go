package claims

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/mosaic-agents/mosaic/internal/atomicfile"
	"github.com/mosaic-agents/mosaic/internal/ids"
	"github.com/mosaic-agents/mosaic/internal/xdg"
)

// Errors carried (via errors.Is) by refusals and failures of this package.
var (
	// ErrCorrupt is a key directory that is not a complete run of valid
	// revisions. It is never read as free: acquisition refuses
	// unsafe-replacement until someone repairs it by hand.
	ErrCorrupt = errors.New("claim record corrupt")
	// ErrRevisionExists is the exclusive create losing: another writer
	// published that revision first.
	ErrRevisionExists = errors.New("claim revision already exists")
	// ErrStale is a claim handle whose record moved under it.
	ErrStale = errors.New("claim changed since it was read")
	// ErrInvalid is a malformed argument.
	ErrInvalid = errors.New("invalid claim argument")
)

// Fault points, in the order a write passes them. A fault hook sees each.
const (
	FaultTempCreated = atomicfile.FaultTempCreated // temp file created, empty
	FaultTempWritten = atomicfile.FaultTempWritten // temp file written, not fsynced
	FaultTempSynced  = atomicfile.FaultTempSynced  // temp file fsynced, final name not linked
	FaultLinked      = atomicfile.FaultLinked      // final name linked, directory not fsynced
	FaultDirSynced   = atomicfile.FaultDirSynced   // revision durable under this key
	FaultBetweenKeys = "between-keys"              // seat key written, session key not yet
)

// FaultFunc is a test hook called at every fault point with the path
// concerned. A non-nil return is treated as that step failing (an injected
// EROFS or ENOSPC); a hook may also kill the process to model a crash.
type FaultFunc func(point, path string) error

// Store is a claim root. It keeps no state in memory between calls: every
// call reads the directories again, and the exclusive create of each
// revision is the only lock.
type Store struct {
	root  string
	host  Host
	hook  FaultFunc
	newID func() string
}

// Option configures a Store.
type Option func(*Store)

// WithHost replaces the host the store reads boot id, process liveness and
// time from (tests use a fake).
func WithHost(h Host) Option { return func(s *Store) { s.host = h } }

// WithFault installs a fault hook (tests only).
func WithFault(f FaultFunc) Option { return func(s *Store) { s.hook = f } }

// Open returns the store rooted at root, an absolute path, creating it
// 0700 if needed.
func Open(root string, opts ...Option) (*Store, error) {
	if !filepath.IsAbs(root) {
		return nil, fmt.Errorf("claim root %q is not absolute: %w", root, ErrInvalid)
	}
	s := &Store{root: filepath.Clean(root), host: LocalHost(), newID: func() string { return ids.Hex(16) }}
	for _, o := range opts {
		o(s)
	}
	if err := os.MkdirAll(s.root, 0o700); err != nil {
		return nil, fmt.Errorf("open claim root %q: %w", s.root, err)
	}
	return s, nil
}

// Root returns the claim root.
func (s *Store) Root() string { return s.root }

// DefaultRoot is $XDG_STATE_HOME/mosaic/claims, or
// ~/.local/state/mosaic/claims when XDG_STATE_HOME is unset or relative
// (the XDG spec says to ignore a relative value).
func DefaultRoot() (string, error) {
	base, err := xdg.StateHome()
	if err != nil {
		return "", fmt.Errorf("default claim root: %w", err)
	}
	return filepath.Join(base, "mosaic", "claims"), nil
}

func (s *Store) fault(point, path string) error {
	if s.hook == nil {
		return nil
	}
	return s.hook(point, path)
}
