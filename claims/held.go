package claims

import "context"

// HeldSeats reads, without settling or writing anything, the seat keys
// whose current revision is conversation's and not proven stopped: the
// seats its claims still hold. It needs no conversation file, only the
// id the revisions carry, so a conversation whose file no longer loads
// can still be asked before it is removed (once removed, nothing could
// prove its stop, and the seat would stay held for good). Keys that
// cannot be read are skipped and reported in the error, alongside what
// could be read.
func (s *Store) HeldSeats(ctx context.Context, conversation string) ([]Record, error) {
	var out []Record
	err := s.eachSlot(ctx, kindSeat, func(_ string, sl *slot) {
		if cur := sl.current(); cur != nil && cur.Conversation == conversation && Proven(cur) != nil {
			out = append(out, *cur)
		}
	})
	return out, err
}
