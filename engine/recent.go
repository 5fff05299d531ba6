package engine

import "slices"

// MaxRecentKey bounds the key a Recent remembers: an engine's ids are
// short (a UUID, a tool call id), and a longer one is never remembered,
// so a few thousand keys of a reduced line's 1 MiB strings cannot add up.
const MaxRecentKey = 1024

// Recent remembers the latest values put under at most a fixed number of
// keys, the oldest put forgotten first. The adapters keep their per-id
// correlation (a tool call's message, a streaming message) in one, since
// the engine invents ids at will: a correlation forgotten costs a key on
// an event, never memory without bound.
type Recent[V any] struct {
	max   int
	m     map[string]recentEntry[V]
	order []recentKey // oldest first; stale entries are skipped
	gen   uint64
}

type recentEntry[V any] struct {
	v   V
	gen uint64
}

type recentKey struct {
	key string
	gen uint64
}

// NewRecent makes a Recent of at most max keys.
func NewRecent[V any](max int) *Recent[V] {
	return &Recent[V]{max: max, m: make(map[string]recentEntry[V])}
}

// Put remembers v under key, forgetting the oldest key past the bound; a
// key over MaxRecentKey is not remembered.
func (r *Recent[V]) Put(key string, v V) {
	if len(key) > MaxRecentKey {
		return
	}
	r.gen++
	r.m[key] = recentEntry[V]{v: v, gen: r.gen}
	r.order = append(r.order, recentKey{key, r.gen})
	for len(r.m) > r.max {
		r.evictOldest()
	}
	if len(r.order) > 2*r.max+16 {
		r.compact()
	}
}

// Get returns what key holds, if it is remembered.
func (r *Recent[V]) Get(key string) (V, bool) {
	e, ok := r.m[key]
	return e.v, ok
}

// Latest returns the keys of the latest n entries put and not forgotten,
// and what each holds, oldest first.
func (r *Recent[V]) Latest(n int) (keys []string, vals []V) {
	for i := len(r.order) - 1; i >= 0 && len(keys) < n; i-- {
		k := r.order[i]
		if e, ok := r.m[k.key]; ok && e.gen == k.gen {
			keys, vals = append(keys, k.key), append(vals, e.v)
		}
	}
	slices.Reverse(keys)
	slices.Reverse(vals)
	return keys, vals
}

// Delete forgets key.
func (r *Recent[V]) Delete(key string) { delete(r.m, key) }

// Len counts the keys remembered.
func (r *Recent[V]) Len() int { return len(r.m) }

func (r *Recent[V]) evictOldest() {
	for len(r.order) > 0 {
		k := r.order[0]
		r.order = r.order[1:]
		if e, ok := r.m[k.key]; ok && e.gen == k.gen {
			delete(r.m, k.key)
			return
		}
	}
}

// compact drops the order's stale entries (keys deleted or put again).
func (r *Recent[V]) compact() {
	live := make([]recentKey, 0, len(r.m))
	for _, k := range r.order {
		if e, ok := r.m[k.key]; ok && e.gen == k.gen {
			live = append(live, k)
		}
	}
	r.order = live
}

// MaxToolKeys bounds the tool call ids an adapter remembers to name the
// message that called them.
const MaxToolKeys = 4096

// MaxBlockIndex bounds a content block's index in a message: an engine's
// message holds a handful of blocks, and an index from the stream becomes
// an ordinal clients address (and may size an array by).
const MaxBlockIndex = 4096

// BlockIndexOK reports whether a streamed content block index is within
// [0, MaxBlockIndex).
func BlockIndexOK(i int) bool { return i >= 0 && i < MaxBlockIndex }

// MaxOpenEffects bounds the tools an adapter tracks as in flight.
const MaxOpenEffects = 1024

// StartEffect records tool call id (named name) as in flight in open,
// false when it cannot be kept: past MaxOpenEffects, or an id or name
// over MaxRecentKey. The caller then marks its binding uncertain rather
// than forgets it, since a stop's proof must never leave out a tool that
// may still run.
func StartEffect(open map[string]Effect, id, name string) bool {
	if _, ok := open[id]; !ok && (len(open) >= MaxOpenEffects || len(id) > MaxRecentKey || len(name) > MaxRecentKey) {
		return false
	}
	open[id] = Effect{CallID: id, Name: name, State: "uncertain"}
	return true
}
