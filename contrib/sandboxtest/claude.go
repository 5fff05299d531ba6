package sandboxtest

import (
	"os"
	"testing"

	"github.com/mosaic-agents/mosaic/contrib/fakeanthropic"
)

// Claude returns the pinned Claude Code binary (MOSAIC_CLAUDE, which
// `make claude` and contrib/claude/install.sh provide); unavailable
// without it.
func Claude(tb testing.TB) string {
	tb.Helper()
	p := os.Getenv("MOSAIC_CLAUDE")
	if p == "" {
		Unavailable(tb, "MOSAIC_CLAUDE is not set: `make claude` installs the pinned Claude Code (MOSAIC_CLAUDE=$(bash contrib/claude/install.sh .build/claude))")
	}
	return p
}

// FakeAnthropic starts a loopback fake Messages API, closed when the
// test ends.
func FakeAnthropic(tb testing.TB) *fakeanthropic.Server {
	tb.Helper()
	s, err := fakeanthropic.Start()
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { s.Close() })
	return s
}
