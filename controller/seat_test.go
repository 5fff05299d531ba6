package controller

import (
	"context"
	"strings"
	"testing"

	"github.com/mosaic-agents/mosaic/audit"
	"github.com/mosaic-agents/mosaic/conversations"
	"github.com/mosaic-agents/mosaic/protocol"
)

// TestSeatOfAnotherConversation: a controller whose seat another
// conversation's claim holds neither follows that claim (its stopped
// revision read as this conversation's, to be recovered here) nor exits
// (the socket restarted it until systemd gave up, the reason in the
// journal alone): it stays up, idle, with admission closed on a reason
// that names the holder and the way to free the seat. Once the holder's
// stop is proven, the seat is free and the controller launches its own
// conversation under its own claim.
func TestSeatOfAnotherConversation(t *testing.T) {
	for _, tc := range []struct {
		name        string
		holderStops bool
		wantBinding string
	}{
		{"held by an active conversation", false, protocol.BindingIdle},
		{"the holder's stop proven", true, protocol.BindingActive},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t, plainScript, nil)
			r.waitBinding("active")
			holder := r.cfg.Conversation.ID
			if tc.holderStops {
				ctl := r.dial()
				gen := r.takeover(ctl)
				cf := ctl.confirm("force-stop", gen)
				if rc := ctl.must(map[string]any{"type": "force-stop", "request": "f1", "generation": gen, "confirmation": cf}, "receipt"); rc["state"] != "stopped" {
					t.Fatalf("force stop receipt %v", rc)
				}
			}
			y := r.seatMate("y.jsonl")
			y.mu.Lock()
			b, claim := y.bindingLocked(), y.st.claim
			y.mu.Unlock()
			if b.State != tc.wantBinding {
				t.Fatalf("binding %s (%s), want %s", b.State, b.AdmissionReason, tc.wantBinding)
			}
			if !tc.holderStops {
				for _, want := range []string{"held by conversation " + holder, "`mosaicctl stop --take --yes " + holder + "`",
					"`systemctl --user restart mosaic-conv@" + y.cfg.Conversation.ID + ".service`"} {
					if !strings.Contains(b.AdmissionReason, want) {
						t.Fatalf("admission reason %q does not say %q", b.AdmissionReason, want)
					}
				}
				if claim != nil {
					t.Fatalf("the controller took the holder's claim %+v", claim.Record())
				}
				return
			}
			if rec := claim.Record(); rec.Conversation != y.cfg.Conversation.ID || rec.Session != "new:"+y.cfg.Conversation.ID {
				t.Fatalf("launched under claim of conversation %s, session %s: want its own", rec.Conversation, rec.Session)
			}
		})
	}
}

// seatMate starts a second conversation's controller on r's project and
// seat, with session file name, the same claim store and scopes, and
// returns it once Start returned; its engine is killed at cleanup.
func (r *rig) seatMate(name string) *Controller {
	r.t.Helper()
	cv := *r.cfg.Conversation
	cv.Session = conversations.SessionPath(cv.Project, cv.Seat, name)
	cv.ID = conversations.ID(cv.Project, cv.Seat, name)
	cfg := r.cfg
	cfg.Conversation = &cv
	cfg.Audit = audit.NewWriter(cv.ID, &syncBuffer{})
	y := New(cfg)
	if err := y.Start(context.Background()); err != nil {
		r.t.Fatalf("the second conversation's Start: %v (it must serve, not exit)", err)
	}
	mate := &rig{t: r.t, ctrl: y}
	r.t.Cleanup(func() {
		mate.killAll()
		y.Close()
	})
	return y
}
