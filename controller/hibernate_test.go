package controller

import (
	"testing"
	"time"
)

// TestHibernateEndsKeptEngineAtEOF: under systemd the fd store keeps a
// copy of the engine's stdin (keep), so the hibernate's close of its own
// reached no EOF: Pi ran on until the grace ended and a TERM took it, and
// a 1 s policy hibernated 4 s after the turn (1 s idle, 3 s grace). The
// hibernate drops the store's copy first; with a grace far longer than
// the policy, the engine then ends at its EOF, the stop is proven, and
// the store holds nothing of it.
func TestHibernateEndsKeptEngineAtEOF(t *testing.T) {
	const grace = 30 * time.Second
	fds := &memFDStore{}
	r := newRigAt(t, sandboxDir(t), plainScript, func(cfg *Config) {
		cfg.FDStore = fds
		cfg.Grace = grace
		cfg.Conversation.IdleStop = "1s"
	}, nil)
	r.waitBinding("active")
	t0 := time.Now()
	select {
	case <-r.ctrl.Hibernated():
	case <-time.After(grace / 2):
		for _, e := range r.audit.entries(t) {
			t.Log(e["MESSAGE"])
		}
		t.Fatalf("not hibernated %s into a 1 s idle policy: the engine did not end at its stdin's EOF, the hibernate waits out the %s grace",
			time.Since(t0).Round(time.Millisecond), grace)
	}
	waitUntil(t, func() bool {
		fds.mu.Lock()
		defer fds.mu.Unlock()
		return len(fds.files) == 0
	})
}
