// Package ids makes the random identifiers mosaic hands out: request,
// connection, execution, stop and claim ids, and the names of temporary
// files. One generator, so every id has the same source of randomness and
// none is made from a read whose error was ignored.
//
// crypto/rand, not a counter or a timestamp: ids cross process restarts
// (a claim outlives its controller, a client reconnects to a new one) and
// must not collide with ones handed out before, nor be guessable by an
// engine that would like to answer for another connection.
package ids

import (
	"crypto/rand"
	"encoding/hex"
)

// Hex returns n random bytes as 2n lowercase hex digits.
func Hex(n int) string {
	b := make([]byte, n)
	// Since Go 1.24 crypto/rand.Read never returns an error: a kernel
	// that cannot supply randomness crashes the program instead.
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// New returns prefix followed by n random bytes in hex.
func New(prefix string, n int) string { return prefix + Hex(n) }
