package claims

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/mosaic-agents/mosaic/protocol"
)

// TestHandoverToReattach: a controller restarting hands the bytes it
// vouched for to the next one on the active revision (Handover); the
// next controller's Reattach takes them (Handed), and its own revision
// drops them, so a controller that crashes later hands over nothing
// stale. A Reattach after no handover has nothing handed; a claim that
// is not active refuses a handover.
func TestHandoverToReattach(t *testing.T) {
	ctx := context.Background()
	v := &FileState{Size: 4321, SHA256: strings.Repeat("cd", 32)}
	said := []Announcement{{UUID: "a1", Said: strings.Repeat("01", 32)}, {UUID: "u2", Said: strings.Repeat("02", 32), Prompt: true}}
	for _, tc := range []struct {
		name    string
		handed  *FileState
		restart int // how many restarts after the handover, each without one
	}{
		{"handed over", v, 1},
		{"nothing handed", nil, 1},
		{"a second restart, without a handover", v, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			c := claimIn(t, openStore(t, root, newHost(100)), testKeys(), Active)
			gen := c.Record().Generation
			if tc.handed != nil {
				if err := c.Handover(ctx, tc.handed, said); err != nil {
					t.Fatal(err)
				}
				st := mustCurrent(t, openStore(t, root, newHost(100)), testKeys())
				for _, rec := range []*Record{st.Seat, st.Session} {
					if rec.State != Active || rec.Generation != gen || rec.Vouched == nil || *rec.Vouched != *tc.handed || !slices.Equal(rec.Announced, said) {
						t.Fatalf("%s key after the handover: %s gen %d vouched %+v announced %+v", rec.KeyKind, rec.State, rec.Generation, rec.Vouched, rec.Announced)
					}
				}
			}
			var got *FileState
			for i := range tc.restart {
				h := newHost(200 + i)
				h.set(testEngine(), true)
				r, err := openStore(t, root, h).Reattach(ctx, testKeys(), "exec-1", testEngine())
				if err != nil {
					t.Fatal(err)
				}
				got = r.Handed()
				if rec := r.Record(); rec.Vouched != nil || rec.Announced != nil || rec.State != Active || rec.Generation != gen {
					t.Fatalf("re-attached revision: %s gen %d vouched %+v announced %+v; want active, gen %d, nothing vouched", rec.State, rec.Generation, rec.Vouched, rec.Announced, gen)
				}
				if want := said; tc.handed == nil || i > 0 {
					if hs := r.HandedAnnounced(); len(hs) != 0 {
						t.Fatalf("restart %d: handed announcements %+v; want none", i+1, hs)
					}
				} else if hs := r.HandedAnnounced(); !slices.Equal(hs, want) {
					t.Fatalf("restart %d: handed announcements %+v; want %+v", i+1, hs, want)
				}
				if i == 0 && (got == nil) != (tc.handed == nil) || got != nil && *got != *tc.handed {
					t.Fatalf("restart %d: handed %+v, want %+v", i+1, got, tc.handed)
				}
			}
			if tc.restart > 1 && got != nil {
				t.Fatalf("the restart after the one that took the handover was handed %+v", got)
			}
		})
	}
	t.Run("the latest announcements within the bound", func(t *testing.T) {
		c := claimIn(t, openStore(t, t.TempDir(), newHost(100)), testKeys(), Active)
		var many []Announcement
		for i := range MaxAnnouncements + 10 {
			many = append(many, Announcement{UUID: fmt.Sprint("a", i), Said: strings.Repeat("01", 32)})
		}
		if err := c.Handover(ctx, v, many); err != nil {
			t.Fatal(err)
		}
		if got := c.Record().Announced; len(got) != MaxAnnouncements || got[0].UUID != "a10" {
			t.Fatalf("recorded %d announcements, the first %+v; want the latest %d", len(got), got[:1], MaxAnnouncements)
		}
	})
	t.Run("not active", func(t *testing.T) {
		c := claimIn(t, openStore(t, t.TempDir(), newHost(100)), testKeys(), Stopping)
		if err := c.Handover(ctx, v, nil); protocol.CodeOf(err) != protocol.CodeClaimState {
			t.Fatalf("handover of a stopping claim: %v; want %s", err, protocol.CodeClaimState)
		}
	})
}

// TestHandoverToRecover: a controller that finds the handed-over claim's
// engine gone, or not its to re-attach, recovers it instead (uncertain),
// and takes the handed-over bytes too; a recover of a claim that was not
// handed over, or is no longer active, takes none.
func TestHandoverToRecover(t *testing.T) {
	ctx := context.Background()
	v := &FileState{Size: 4321, SHA256: strings.Repeat("cd", 32)}
	for _, tc := range []struct {
		name   string
		handed bool
		alive  bool
		want   *FileState
	}{
		{"handed over, engine gone", true, false, v},
		{"handed over, engine alive", true, true, v},
		{"nothing handed", false, false, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			c := claimIn(t, openStore(t, root, newHost(100)), testKeys(), Active)
			if tc.handed {
				if err := c.Handover(ctx, v, []Announcement{{UUID: "a1", Said: strings.Repeat("01", 32)}}); err != nil {
					t.Fatal(err)
				}
			}
			h := newHost(200)
			h.set(testEngine(), tc.alive)
			got, err := openStore(t, root, h).Recover(ctx, testKeys())
			if err != nil {
				t.Fatal(err)
			}
			hv := got.Claim.Handed()
			if (hv == nil) != (tc.want == nil) || hv != nil && *hv != *tc.want {
				t.Fatalf("recovered handle handed %+v, want %+v", hv, tc.want)
			}
			if hs := got.Claim.HandedAnnounced(); (len(hs) == 1) != (tc.want != nil) {
				t.Fatalf("recovered handle handed announcements %+v", hs)
			}
			if rec := got.Claim.Record(); rec.Vouched != nil || rec.State != Uncertain {
				t.Fatalf("recovered revision %s vouched %+v; want uncertain, nothing vouched", rec.State, rec.Vouched)
			}
		})
	}
	t.Run("a stopped claim's bytes are not handed", func(t *testing.T) {
		root := t.TempDir()
		c := claimIn(t, openStore(t, root, newHost(100)), testKeys(), Stopping)
		if err := c.StopVouched(ctx, cohortProof(t, c.Record()), "", v); err != nil {
			t.Fatal(err)
		}
		got, err := openStore(t, root, newHost(200)).Recover(ctx, testKeys())
		if err != nil {
			t.Fatal(err)
		}
		if hv := got.Claim.Handed(); hv != nil {
			t.Fatalf("a recover of a stopped claim was handed %+v", hv)
		}
	})
}
