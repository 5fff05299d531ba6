package queue

import (
	"regexp"
	"strings"
	"testing"

	"github.com/mosaic-agents/mosaic/internal/shape/shapetest"
)

// Item ids keep the shape their expression gave them.
func TestItemShape(t *testing.T) {
	shapetest.Check(t, regexp.MustCompile(`^[a-z]{1,4}-[0-9a-f]{8,64}$`), validItem,
		"q-0123abcd", "abcd-"+strings.Repeat("f", 64), "abcde-01234567", "q-0123abc", "q-"+strings.Repeat("f", 65), "-01234567", "q-0123abcd-")
}
