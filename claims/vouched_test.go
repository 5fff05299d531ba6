package claims

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestVouchedOnTheStoppedRevision: the bytes the controller last vouched
// for reach the stopped revision under both keys, from a stop
// (StopVouched) and a hibernate; the next revision (a resume) drops them,
// since they are about the execution that stopped; a stop that recorded
// none writes no field, which is how a revision of an older mosaic reads,
// and stays wakeable after a hibernate.
func TestVouchedOnTheStoppedRevision(t *testing.T) {
	ctx := context.Background()
	v := &FileState{Size: 1234, SHA256: strings.Repeat("ab", 32)}
	for _, tc := range []struct {
		name      string
		vouched   *FileState
		hibernate bool
	}{
		{"force stop", v, false},
		{"hibernate", v, true},
		{"hibernate, nothing recorded", nil, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			s := openStore(t, root, newHost(100))
			keys := testKeys()
			c := claimIn(t, s, keys, Stopping)
			var err error
			if tc.hibernate {
				err = c.Hibernate(ctx, cohortProof(t, c.Record()), "", "leaf-1", "", tc.vouched)
			} else {
				err = c.StopVouched(ctx, cohortProof(t, c.Record()), "", tc.vouched)
			}
			if err != nil {
				t.Fatal(err)
			}
			st := mustCurrent(t, s, keys)
			for _, rec := range []*Record{st.Seat, st.Session} {
				if (rec.Vouched == nil) != (tc.vouched == nil) || rec.Vouched != nil && *rec.Vouched != *tc.vouched {
					t.Fatalf("%s key: vouched %+v, want %+v", rec.KeyKind, rec.Vouched, tc.vouched)
				}
				if tc.hibernate {
					if err := Wakeable(rec); err != nil {
						t.Fatalf("%s key: %v", rec.KeyKind, err)
					}
				}
			}
			files, _ := filepath.Glob(filepath.Join(root, "*", "*", "r*.json"))
			if len(files) == 0 {
				t.Fatalf("no revision files under %s", root)
			}
			for _, f := range files {
				b, err := os.ReadFile(f)
				if err != nil {
					t.Fatal(err)
				}
				if tc.vouched == nil && strings.Contains(string(b), `"vouched"`) {
					t.Fatalf("%s names vouched though none was recorded:\n%s", f, b)
				}
			}
			req := testRequest(keys)
			req.Leaf = st.Seat.Leaf
			next, err := s.Resume(ctx, req)
			if err != nil {
				t.Fatal(err)
			}
			if r := next.Record(); r.Vouched != nil {
				t.Fatalf("the resumed revision kept the stopped one's vouched bytes %+v", r.Vouched)
			}
		})
	}
}
