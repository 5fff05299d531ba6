package controller

import (
	"context"
	"testing"

	"github.com/mosaic-agents/mosaic/audit"
	"github.com/mosaic-agents/mosaic/claims"
	"github.com/mosaic-agents/mosaic/protocol"
)

// rebootedHost is the machine after a reboot: another boot id, and no
// process of the old boot alive.
type rebootedHost struct{ claims.Host }

func (rebootedHost) BootID() (string, error) { return "11111111-2222-4333-8444-555555555555", nil }

func (h rebootedHost) Self() (claims.Process, error) {
	p, err := h.Host.Self()
	p.BootID = "11111111-2222-4333-8444-555555555555"
	return p, err
}

func (rebootedHost) Alive(claims.Process) (bool, error) { return false, nil }

// TestRestartJournalsBootProof: a controller that starts after a reboot
// finds the claim of an engine of the old boot, which the claim store
// stops with a boot proof; that proof is journaled like a cohort proof,
// so `mosaicctl audit` finds every proof of the store in the journal.
func TestRestartJournalsBootProof(t *testing.T) {
	r := newRig(t, `{"turns":[]}`, nil)
	r.waitBinding("active")
	store, err := claims.Open(r.cfg.Claims.Root(), claims.WithHost(rebootedHost{claims.LocalHost()}))
	if err != nil {
		t.Fatal(err)
	}
	cfg := r.cfg
	cfg.Claims = store
	buf := &syncBuffer{}
	cfg.Audit = audit.NewWriter(cfg.Conversation.ID, buf)
	b := New(cfg)
	if err := b.Start(context.Background()); err != nil {
		t.Fatalf("start after the reboot: %v", err)
	}
	t.Cleanup(b.Close)
	b.mu.Lock()
	rec, binding := b.st.claim.Record(), b.st.binding
	b.mu.Unlock()
	if binding != protocol.BindingStopped || rec.Proof == nil || rec.Proof.Type != "boot" {
		t.Fatalf("after the reboot: binding %s, claim %s proof %+v; want stopped with a boot proof", binding, rec.State, rec.Proof)
	}
	for _, e := range buf.entries(t) {
		if e["MOSAIC_EVENT"] == string(audit.Proof) && e["MOSAIC_PROOF_DIGEST"] == rec.Proof.Digest && e["MOSAIC_PROOF_TYPE"] == "boot" &&
			e["MOSAIC_PROOF"] == string(rec.Proof.Body) {
			return
		}
	}
	t.Fatalf("the boot proof %s is not journaled: %v", rec.Proof.Digest, buf.entries(t))
}
