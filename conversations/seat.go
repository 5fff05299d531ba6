package conversations

// SameSeat reports whether a and b take the same seat tuple (seat, project,
// workspace): the claim store's seat key, which one engine holds at a
// time (W4).
func SameSeat(a, b *Conversation) bool {
	return a.Seat == b.Seat && a.Project == b.Project && a.Workspace == b.Workspace
}

// OnSeat returns the registered conversations other than c (by id) on c's
// seat tuple. A file that does not load is not counted: its seat is not
// known, and its controller cannot start to take the seat.
func (s *Store) OnSeat(c *Conversation) ([]*Conversation, error) {
	list, _, err := s.List()
	if err != nil {
		return nil, err
	}
	var out []*Conversation
	for _, o := range list {
		if o.ID != c.ID && SameSeat(o, c) {
			out = append(out, o)
		}
	}
	return out, nil
}
