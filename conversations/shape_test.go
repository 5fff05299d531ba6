package conversations

import (
	"regexp"
	"strings"
	"testing"

	"github.com/mosaic-agents/mosaic/internal/shape/shapetest"
)

// The names and ids keep the shapes their expressions gave them.
func TestNameShapes(t *testing.T) {
	shapetest.Check(t, regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`), validName,
		"main", "-x", "a.b_c-d", strings.Repeat("Z", 64), strings.Repeat("Z", 65), "a b", "a:b")
	shapetest.Check(t, regexp.MustCompile(`^pi-[0-9a-f]{20}$`), ValidID,
		"pi-0123456789abcdef0123", "pi-0123456789ABCDEF0123", "pi-0123456789abcdef012", "px-0123456789abcdef0123")
	shapetest.Check(t, regexp.MustCompile(`^[0-9a-f]{64}$`), validSHA256, strings.Repeat("0f", 32))
}
