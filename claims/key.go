package claims

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/mosaic-agents/mosaic/proofs"
)

// SeatKey is the first claim key: one writer per (seat, project, workspace).
type SeatKey struct {
	Seat      string `json:"seat"`
	Project   string `json:"project"`
	Workspace string `json:"workspace"`
}

// Keys are the two keys of one claim, always taken seat first, then
// session, so two controllers can never deadlock or interleave backwards.
type Keys struct {
	Seat SeatKey
	// Session is the native session identity: the Pi header id or the
	// Claude session UUID.
	Session string
}

// Key kinds, the name of the directory level under the root.
const (
	kindSeat    = "seat"
	kindSession = "session"
)

const maxKeyPart = 4096

func (k Keys) validate() error {
	for name, v := range map[string]string{
		"seat": k.Seat.Seat, "project": k.Seat.Project, "workspace": k.Seat.Workspace, "session": k.Session,
	} {
		if v == "" || len(v) > maxKeyPart || strings.ContainsRune(v, 0) {
			return fmt.Errorf("claim key %s %q: %w", name, v, ErrInvalid)
		}
	}
	return nil
}

// seatHash names a seat key's directory: the SHA-256 of the canonical JSON
// of the tuple, so no part of a key ever becomes a path component.
func seatHash(k SeatKey) string {
	b, err := proofs.Canonical(k)
	if err != nil { // three strings always encode
		panic(err)
	}
	return sum(b)
}

func sessionHash(id string) string { return sum([]byte(id)) }

func sum(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

func (s *Store) seatDir(k SeatKey) string {
	return filepath.Join(s.root, kindSeat, seatHash(k))
}

func (s *Store) sessionDir(id string) string {
	return filepath.Join(s.root, kindSession, sessionHash(id))
}
