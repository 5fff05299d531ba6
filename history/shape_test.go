package history

import (
	"regexp"
	"strings"
	"testing"

	"github.com/mosaic-agents/mosaic/internal/shape/shapetest"
)

// The ids that cross the socket unchanged keep the shape their expression
// gave them.
func TestPlainIDShape(t *testing.T) {
	shapetest.Check(t, regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$`), plainID,
		"a", "msg:1", ".a", "call_x|fc_y", strings.Repeat("a", 128), strings.Repeat("a", 129), "é")
}
