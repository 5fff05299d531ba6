// Package shapetest checks a shape function against the regular
// expression it stands for.
package shapetest

import (
	"math/rand/v2"
	"regexp"
	"testing"
)

// alphabet straddles every class the shapes use: digits, hex letters and
// the letters after them, both cases, the punctuation names allow, and
// bytes no shape allows.
const alphabet = "09afgzAFGZ.-_:r/ \n\x00\xff"

// Check fails t unless match agrees with re on "", on every seed, and on
// variants of each seed: every prefix, one byte of the alphabet inserted
// or substituted at every position, and random multi-byte substitutions.
func Check(t *testing.T, re *regexp.Regexp, match func(string) bool, seeds ...string) {
	t.Helper()
	check := func(s string) {
		t.Helper()
		if want, got := re.MatchString(s), match(s); got != want {
			t.Fatalf("%q: the shape says %v, %s says %v", s, got, re, want)
		}
	}
	check("")
	r := rand.New(rand.NewPCG(1, 2))
	for _, s := range seeds {
		check(s)
		for i := 0; i <= len(s); i++ {
			check(s[:i])
			for j := 0; j < len(alphabet); j++ {
				check(s[:i] + alphabet[j:j+1] + s[i:])
				if i < len(s) {
					check(s[:i] + alphabet[j:j+1] + s[i+1:])
				}
			}
		}
		for n := 0; n < 2000 && len(s) > 0; n++ {
			b := []byte(s)
			for k := r.IntN(3); k >= 0; k-- {
				b[r.IntN(len(b))] = alphabet[r.IntN(len(alphabet))]
			}
			check(string(b))
		}
	}
}
