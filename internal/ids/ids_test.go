package ids

import (
	"regexp"
	"testing"
)

func TestHex(t *testing.T) {
	seen := map[string]bool{}
	for _, n := range []int{8, 16} {
		want := regexp.MustCompile("^r-[0-9a-f]{" + map[int]string{8: "16", 16: "32"}[n] + "}$")
		for range 100 {
			id := New("r-", n)
			if !want.MatchString(id) || seen[id] {
				t.Fatalf("New(r-, %d) = %q (repeated: %v)", n, id, seen[id])
			}
			seen[id] = true
		}
	}
	if got := Hex(0); got != "" {
		t.Fatalf("Hex(0) = %q", got)
	}
}
