package claims

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// HeldSeats reads, without settling or writing anything, the seat keys
// whose current revision is conversation's and not proven stopped: the
// seats its claims still hold. It needs no conversation file, only the
// id the revisions carry, so a conversation whose file no longer loads
// can still be asked before it is removed (once removed, nothing could
// prove its stop, and the seat would stay held for good). Keys that
// cannot be read are skipped and reported in the error, alongside what
// could be read.
func (s *Store) HeldSeats(ctx context.Context, conversation string) ([]Record, error) {
	root := filepath.Join(s.root, kindSeat)
	dirs, err := os.ReadDir(root)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read claim root %q: %w", s.root, err)
	}
	var out []Record
	var errs []error
	for _, d := range dirs {
		if err := ctx.Err(); err != nil {
			return out, err
		}
		if !d.IsDir() {
			continue
		}
		sl, err := readSlot(filepath.Join(root, d.Name()), kindSeat)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if cur := sl.current(); cur != nil && cur.Conversation == conversation && Proven(cur) != nil {
			out = append(out, *cur)
		}
	}
	return out, errors.Join(errs...)
}
