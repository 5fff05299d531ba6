package controller

import (
	"slices"

	"github.com/mosaic-agents/mosaic/protocol"
)

// Bounds on what the controller keeps about past commands. Only the
// controller adds to these indexes, but a long-lived controller that
// stops and recovers many times must not grow without end.
const (
	// maxStops bounds the stops kept by id. At most two stops are ever
	// unfinished at once (an interrupt and the force stop superseding it),
	// so making room never needs more than the finished ones.
	maxStops = 64
	// maxEligibilities bounds the eligibility records kept. Each needs a
	// recover with its own confirmation; a client that asks for more than
	// this without launching loses the oldest unused ones.
	maxEligibilities = 16
)

// index is a map of at most max entries that remembers the order they
// were added in. Making room forgets the oldest entry that is finished,
// and only when none is, the oldest of all. Callers hold the
// controller's mu.
type index[V any] struct {
	max   int
	m     map[string]V
	order []string // the keys of m, oldest first
}

func newIndex[V any](max int) *index[V] {
	return &index[V]{max: max, m: map[string]V{}}
}

// get returns the entry of id, if kept.
func (x *index[V]) get(id string) (V, bool) {
	v, ok := x.m[id]
	return v, ok
}

// put keeps v under id. A new id beyond the bound first forgets one
// entry, chosen by finished as above.
func (x *index[V]) put(id string, v V, finished func(V) bool) {
	if _, ok := x.m[id]; !ok {
		if len(x.m) >= x.max {
			x.evict(finished)
		}
		x.order = append(x.order, id)
	}
	x.m[id] = v
}

func (x *index[V]) evict(finished func(V) bool) {
	i := slices.IndexFunc(x.order, func(id string) bool { return finished(x.m[id]) })
	if i < 0 {
		i = 0
	}
	delete(x.m, x.order[i])
	x.order = slices.Delete(x.order, i, i+1)
}

// keepStopLocked records s by id. A finished stop that is not the
// current one is what goes first.
func (c *Controller) keepStopLocked(s *protocol.Stop) {
	c.stops.put(s.ID, s, func(old *protocol.Stop) bool { return terminal[old.State] && old != c.st.stop })
}

// keepEligibilityLocked records e. A used eligibility, or one from an
// earlier generation (which launch refuses for good, generations only
// rising), is what goes first.
func (c *Controller) keepEligibilityLocked(e *eligibility) {
	c.elig.put(e.rec.ID, e, func(old *eligibility) bool { return old.used || old.rec.Generation != c.st.generation })
}
