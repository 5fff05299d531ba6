package controller

import (
	"fmt"
	"sync"
	"time"

	"github.com/mosaic-agents/mosaic/audit"
)

// refusalWindow is how often a burst of transport refusals is journaled.
const refusalWindow = 10 * time.Second

// burstLog journals refusals that a flood can produce once per connection
// (too-many-connections, hello-timeout) without letting the journal become
// the flood: the first of a code is journaled at once, later ones of the
// same window are counted, and one entry per window says how many there
// were (MOSAIC_COUNT). Nothing is dropped: every refusal is in a count.
type burstLog struct {
	log    *audit.Logger
	window time.Duration

	mu      sync.Mutex
	pending map[string]*burst // by refusal code
	timer   *time.Timer
}

type burst struct {
	n       int
	message string // the latest one
}

func newBurstLog(log *audit.Logger, window time.Duration) *burstLog {
	return &burstLog{log: log, window: window, pending: map[string]*burst{}}
}

// note records one refusal of code.
func (b *burstLog) note(code, message string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.timer == nil {
		b.timer = time.AfterFunc(b.window, b.tick)
		b.write(code, message, 1, "")
		return
	}
	p := b.pending[code]
	if p == nil {
		p = &burst{}
		b.pending[code] = p
	}
	p.n++
	p.message = message
}

// tick journals the counts of the window that ended, and keeps the window
// open while refusals keep coming.
func (b *burstLog) tick() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.pending) == 0 {
		b.timer = nil
		return
	}
	b.flushLocked()
	b.timer = time.AfterFunc(b.window, b.tick)
}

// flush journals what is counted now; Serve calls it on the way out.
func (b *burstLog) flush() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.timer != nil {
		b.timer.Stop()
		b.timer = nil
	}
	b.flushLocked()
}

func (b *burstLog) flushLocked() {
	for code, p := range b.pending {
		b.write(code, p.message, p.n, fmt.Sprintf(" (%d refusals in the last %s)", p.n, b.window))
	}
	clear(b.pending)
}

func (b *burstLog) write(code, message string, n int, suffix string) {
	b.log.Log(audit.Entry{Event: audit.Refusal, Refusal: code,
		Message: fmt.Sprintf("refused %s: %s%s", code, message, suffix),
		Fields:  map[string]string{"COUNT": fmt.Sprint(n)}})
}
