package shape

import (
	"regexp"
	"strings"
	"testing"

	"github.com/mosaic-agents/mosaic/internal/shape/shapetest"
)

func TestShapesMatchTheirExpressions(t *testing.T) {
	revision := func(s string) bool { _, ok := Revision(s); return ok }
	for _, c := range []struct {
		name  string
		re    string // what the shape replaced, as it was written
		match func(string) bool
		seeds []string
	}{
		{"token", `^[A-Za-z0-9][a-z]{0,3}$`, func(s string) bool { return Token(s, 1, 4, Alnum, Lower) }, []string{"a", "Zabc", "0abcd", "ab1"}},
		{"hex32", `^[0-9a-f]{32}$`, func(s string) bool { return Hex(s, 32) }, []string{strings.Repeat("9", 32), strings.Repeat("g", 32), strings.Repeat("9", 33)}},
		{"sha256", `^[0-9a-f]{64}$`, func(s string) bool { return Hex(s, 64) }, []string{strings.Repeat("0f", 32), strings.Repeat("0F", 32)}},
		{"uuid", `^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`, UUID, []string{"01234567-89ab-cdef-0123-456789abcdef", "01234567-89AB-cdef-0123-456789abcdef", "0123456789ab-cdef-0123-456789abcdef-"}},
		{"revision", `^r([0-9]{10})\.json$`, revision, []string{"r0000000001.json", "r000000001.json", "r00000000012.json", "R0000000001.json"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			shapetest.Check(t, regexp.MustCompile(c.re), c.match, c.seeds...)
		})
	}
}

func TestRevisionDigits(t *testing.T) {
	if d, ok := Revision("r0000000042.json"); !ok || d != "0000000042" {
		t.Fatalf("Revision = %q, %v; want 0000000042", d, ok)
	}
}
