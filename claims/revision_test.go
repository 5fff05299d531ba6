package claims

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/mosaic-agents/mosaic/protocol"
)

// Mutant 3: a revision is created exclusively and never overwritten.
func TestPublishIsWriteOnce(t *testing.T) {
	s := openStore(t, t.TempDir(), newHost(100))
	dir := filepath.Join(s.Root(), kindSeat, seatHash(testKeys().Seat))
	rec := Record{Format: formatVersion, KeyKind: kindSeat, Revision: 1, Claim: "a", Seq: 1, Generation: 1,
		Seat: testKeys().Seat, Session: testKeys().Session, State: Reserved}
	if err := s.publish(dir, rec); err != nil {
		t.Fatal(err)
	}
	first, err := os.ReadFile(filepath.Join(dir, revisionFile(1)))
	if err != nil {
		t.Fatal(err)
	}
	rec.Claim = "b"
	if err := s.publish(dir, rec); !errors.Is(err, ErrRevisionExists) {
		t.Fatalf("second publish of r1: %v, want ErrRevisionExists", err)
	}
	again, _ := os.ReadFile(filepath.Join(dir, revisionFile(1)))
	if string(again) != string(first) {
		t.Fatal("revision 1 was overwritten")
	}
	if m, _ := filepath.Glob(filepath.Join(dir, "*.tmp")); len(m) != 0 {
		t.Fatalf("temp files left: %v", m)
	}
}

// W1 (deterministic): two controllers read the same free keys and both
// try revision 1. Exactly one claim results; the loser refuses
// already-active, and the winner's revision is intact.
func TestAcquireRaceExactlyOneWins(t *testing.T) {
	for _, point := range []string{FaultTempCreated, FaultTempSynced} {
		t.Run(point, func(t *testing.T) {
			ctx := context.Background()
			root := t.TempDir()
			b := openStore(t, root, newHost(200))
			var bClaim *Claim
			var bErr error
			fired := false
			a := openStore(t, root, newHost(100), WithFault(func(p, path string) error {
				// Let B run its whole acquisition inside A's first write.
				if p == point && !fired {
					fired = true
					bClaim, bErr = b.Acquire(ctx, testRequest(testKeys()))
				}
				return nil
			}))
			_, aErr := a.Acquire(ctx, testRequest(testKeys()))
			if bErr != nil {
				t.Fatalf("B: %v", bErr)
			}
			wantCode(t, aErr, protocol.CodeAlreadyActive)
			st := mustCurrent(t, b, testKeys())
			for _, r := range []*Record{st.Seat, st.Session} {
				if r.Claim != bClaim.Record().Claim || r.State != Reserved || r.Revision != 1 {
					t.Fatalf("winner's claim lost or overwritten: %+v", r)
				}
			}
			if err := bClaim.Activate(ctx, testEngine()); err != nil {
				t.Fatalf("winner cannot proceed: %v", err)
			}
		})
	}
}

// W4 race: A holds the seat key and loses the session key to B, which
// claims the same session under another seat. A refuses and gives its
// seat key back: no partial claim.
func TestAcquireLosesSessionKeyAndUndoes(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	otherSeat := testKeys()
	otherSeat.Seat.Seat = "darkwing"
	b := openStore(t, root, newHost(200))
	var bErr error
	a := openStore(t, root, newHost(100), WithFault(func(p, path string) error {
		if p == FaultBetweenKeys && bErr == nil {
			_, bErr = b.Acquire(ctx, testRequest(otherSeat))
			if bErr == nil {
				bErr = errors.New("done")
			}
		}
		return nil
	}))
	_, err := a.Acquire(ctx, testRequest(testKeys()))
	wantCode(t, err, protocol.CodeAlreadyActive)
	st := mustCurrent(t, a, testKeys())
	if !st.Seat.State.valid() || st.Seat.State != Stopped || Proven(st.Seat) != nil || st.Seat.Proof.Type != ProofUnlaunched {
		t.Fatalf("A's seat key: %+v", st.Seat)
	}
	if st.Session.Seat != otherSeat.Seat || st.Session.State != Reserved {
		t.Fatalf("B lost the session key: %+v", st.Session)
	}
	// A's seat is free again.
	if _, err := a.Acquire(ctx, testRequest(Keys{Seat: testKeys().Seat, Session: "pi-session-3"})); err != nil {
		t.Fatal(err)
	}
}

// Injected write failures (read-only or full filesystem) at every step:
// the refusal is claim-store, the recorded state is the old one or the
// new one, and an acquisition leaves no partial claim.
func TestWriteFailures(t *testing.T) {
	points := []string{FaultTempCreated, FaultTempWritten, FaultTempSynced, FaultLinked, FaultDirSynced, FaultBetweenKeys}
	for _, errno := range []error{syscall.EROFS, syscall.ENOSPC} {
		for _, point := range points {
			for _, which := range []string{kindSeat, kindSession} {
				t.Run(errno.Error()+"/"+point+"/"+which, func(t *testing.T) {
					ctx := context.Background()
					root := t.TempDir()
					armed := false
					hits := 0
					s := openStore(t, root, newHost(100), WithFault(func(p, path string) error {
						if !armed || p != point {
							return nil
						}
						if point != FaultBetweenKeys && !inKind(path, which) {
							return nil
						}
						if point == FaultBetweenKeys && which == kindSession {
							return nil
						}
						hits++
						if hits == 1 {
							return errno
						}
						return nil
					}))
					// Acquire under failure.
					armed = true
					_, err := s.Acquire(ctx, testRequest(testKeys()))
					armed = false
					if hits == 0 {
						t.Skip("fault point not on this key")
					}
					wantCode(t, err, protocol.CodeClaimStore)
					if !errors.Is(err, errno) {
						t.Fatalf("cause lost: %v", err)
					}
					st := mustCurrent(t, s, testKeys())
					if !st.Free {
						t.Fatalf("partial claim after failed acquire: %+v / %+v", st.Seat, st.Session)
					}
					// A transition under failure: old or new state, never other.
					c, err := s.Acquire(ctx, testRequest(testKeys()))
					if err != nil {
						t.Fatal(err)
					}
					if err := c.Activate(ctx, testEngine()); err != nil {
						t.Fatal(err)
					}
					hits, armed = 0, true
					err = c.BeginStop(ctx, "stop")
					armed = false
					wantCode(t, err, protocol.CodeClaimStore)
					st = mustCurrent(t, s, testKeys())
					if st.Seat.State != Active && st.Seat.State != Stopping || !sameRevision(*st.Seat, *st.Session) {
						t.Fatalf("after failed transition: %+v / %+v", st.Seat, st.Session)
					}
				})
			}
		}
	}
}

func inKind(path, kind string) bool {
	return filepath.Base(filepath.Dir(filepath.Dir(path))) == kind
}

// A read-only claim root (non-root only: root bypasses mode bits; the
// injected EROFS above covers root).
func TestReadOnlyRoot(t *testing.T) {
	if os.Geteuid() == 0 {
		t.Skip("root ignores directory modes; TestWriteFailures injects EROFS instead")
	}
	ctx := context.Background()
	root := t.TempDir()
	s := openStore(t, root, newHost(100))
	if err := os.Chmod(root, 0o500); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Chmod(root, 0o700) })
	_, err := s.Acquire(ctx, testRequest(testKeys()))
	wantCode(t, err, protocol.CodeClaimStore)
	os.Chmod(root, 0o700)
	if !mustCurrent(t, s, testKeys()).Free {
		t.Fatal("claim left behind")
	}
}

// A corrupt, truncated or missing revision is never read as free, and
// never as an older state.
func TestCorruptRevisions(t *testing.T) {
	tests := []struct {
		name   string
		damage func(t *testing.T, dir string)
	}{
		{"truncated newest", func(t *testing.T, dir string) {
			p := filepath.Join(dir, revisionFile(4))
			b, _ := os.ReadFile(p)
			os.WriteFile(p, b[:len(b)/2], 0o600)
		}},
		{"empty newest", func(t *testing.T, dir string) { os.WriteFile(filepath.Join(dir, revisionFile(4)), nil, 0o600) }},
		{"garbage middle", func(t *testing.T, dir string) {
			os.WriteFile(filepath.Join(dir, revisionFile(2)), []byte("{\"format\":1}"), 0o600)
		}},
		{"gap", func(t *testing.T, dir string) { os.Remove(filepath.Join(dir, revisionFile(3))) }},
		{"revision from another key", func(t *testing.T, dir string) {
			other := filepath.Join(filepath.Dir(filepath.Dir(dir)), kindSession)
			m, _ := filepath.Glob(filepath.Join(other, "*", revisionFile(5)))
			b, _ := os.ReadFile(m[0])
			os.WriteFile(filepath.Join(dir, revisionFile(5)), b, 0o600)
		}},
		{"unknown field", func(t *testing.T, dir string) {
			p := filepath.Join(dir, revisionFile(4))
			b, _ := os.ReadFile(p)
			os.WriteFile(p, append([]byte(`{"released":true,`), b[1:]...), 0o600)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			root := t.TempDir()
			s := openStore(t, root, newHost(100))
			c := claimIn(t, s, testKeys(), Stopped) // r1..r4, last one stopped
			// One more acquisition so the newest revision is a live claim.
			if _, err := s.Acquire(ctx, testRequest(testKeys())); err != nil {
				t.Fatal(err)
			}
			_ = c
			tt.damage(t, s.seatDir(testKeys().Seat))
			_, err := s.Acquire(ctx, testRequest(testKeys()))
			wantCode(t, err, protocol.CodeUnsafeReplacement)
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("%v lacks ErrCorrupt", err)
			}
			if _, err := s.Current(ctx, testKeys()); !errors.Is(err, ErrCorrupt) {
				t.Fatalf("Current: %v", err)
			}
			_, err = openStore(t, root, newHost(200)).Recover(ctx, testKeys())
			wantCode(t, err, protocol.CodeUnsafeReplacement)
		})
	}
}

func TestStaleTempFilesIgnored(t *testing.T) {
	s := openStore(t, t.TempDir(), newHost(100))
	claimIn(t, s, testKeys(), Active)
	dir := s.seatDir(testKeys().Seat)
	os.WriteFile(filepath.Join(dir, ".r0000000004.999.dead.tmp"), []byte("{half"), 0o600)
	st := mustCurrent(t, s, testKeys())
	if st.Seat.State != Active || st.Seat.Revision != 3 {
		t.Fatalf("%+v", st.Seat)
	}
}

func TestDefaultRoot(t *testing.T) {
	t.Setenv("XDG_STATE_HOME", "/state")
	if r, _ := DefaultRoot(); r != "/state/mosaic/claims" {
		t.Fatal(r)
	}
	t.Setenv("XDG_STATE_HOME", "relative")
	t.Setenv("HOME", "/home/u")
	if r, _ := DefaultRoot(); r != "/home/u/.local/state/mosaic/claims" {
		t.Fatal(r)
	}
	if _, err := Open("relative/root"); !errors.Is(err, ErrInvalid) {
		t.Fatal(err)
	}
}
