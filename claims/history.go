package claims

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"time"
)

// ProofRevision is a revision that recorded a proof, and when its file was
// written (revisions are write-once, so its mtime is its time).
type ProofRevision struct {
	Record
	Path    string
	Written time.Time
}

// Proofs reads, without settling or writing anything, every revision under
// every key of the store that is about conversation and carries a proof,
// once per claim revision (the seat and session copies are one), oldest
// first. It is what an audit cross-checks against the journal. Keys that
// cannot be read are skipped and reported in the error (carrying
// ErrCorrupt for damaged ones), alongside whatever could be read.
func (s *Store) Proofs(ctx context.Context, conversation string) ([]ProofRevision, error) {
	seen := map[string]int{}
	var out []ProofRevision
	var errs []error
	for _, kind := range []string{kindSeat, kindSession} {
		err := s.eachSlot(ctx, kind, func(dir string, sl *slot) {
			for _, rec := range sl.revs {
				if rec.Conversation != conversation || rec.Proof == nil {
					continue
				}
				path := filepath.Join(dir, revisionFile(rec.Revision))
				var mt time.Time
				if fi, err := os.Stat(path); err == nil {
					mt = fi.ModTime()
				}
				key := fmt.Sprintf("%s/%d", rec.Claim, rec.Seq)
				if i, ok := seen[key]; ok {
					if !mt.IsZero() && mt.Before(out[i].Written) {
						out[i].Written = mt
					}
					continue
				}
				seen[key] = len(out)
				out = append(out, ProofRevision{Record: rec, Path: path, Written: mt})
			}
		})
		if ctx.Err() != nil {
			return out, ctx.Err()
		}
		errs = append(errs, err)
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Written.Before(out[j].Written) })
	return out, errors.Join(errs...)
}

// eachSlot reads every key directory of kind and calls fn with each that
// reads, in directory order, stopping early only when ctx ends (its error
// is then returned). A store without that kind holds no key; keys that
// cannot be read are skipped and reported in the error.
func (s *Store) eachSlot(ctx context.Context, kind string, fn func(dir string, sl *slot)) error {
	dirs, err := os.ReadDir(filepath.Join(s.root, kind))
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read claim root %q: %w", s.root, err)
	}
	var errs []error
	for _, d := range dirs {
		if err := ctx.Err(); err != nil {
			return err
		}
		if !d.IsDir() {
			continue
		}
		dir := filepath.Join(s.root, kind, d.Name())
		sl, err := readSlot(dir, kind)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		fn(dir, sl)
	}
	return errors.Join(errs...)
}
