package engine

import (
	"fmt"
	"strings"
	"testing"
)

// TestRecentBounded: a Recent keeps at most its bound of keys, the newest
// put, forgets the oldest first, never remembers a key over MaxRecentKey,
// and its bookkeeping stays bounded however often keys are put again or
// deleted.
func TestRecentBounded(t *testing.T) {
	for _, tc := range []struct {
		name string
		put  func(r *Recent[int], i int)
	}{
		{"fresh keys", func(r *Recent[int], i int) { r.Put(fmt.Sprint(i), i) }},
		{"put and delete", func(r *Recent[int], i int) { r.Put(fmt.Sprint(i), i); r.Delete(fmt.Sprint(i - 1)) }},
		{"one key again", func(r *Recent[int], i int) { r.Put("k", i); r.Put(fmt.Sprint(i), i) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const bound, n = 64, 10000
			r := NewRecent[int](bound)
			for i := range n {
				tc.put(r, i)
			}
			r.Put(strings.Repeat("x", MaxRecentKey+1), 1)
			if r.Len() > bound || len(r.order) > 2*bound+16 {
				t.Fatalf("%d keys, %d in order after %d puts; want at most %d", r.Len(), len(r.order), n, bound)
			}
			if v, ok := r.Get(fmt.Sprint(n - 1)); !ok || v != n-1 {
				t.Fatalf("the newest key: %d, %v", v, ok)
			}
			if _, ok := r.Get("0"); ok {
				t.Fatal("the oldest key is still remembered")
			}
			if _, ok := r.Get(strings.Repeat("x", MaxRecentKey+1)); ok {
				t.Fatal("a key over MaxRecentKey is remembered")
			}
		})
	}
}

// TestRecentLatest: Latest lists the newest keys put and still
// remembered, oldest first, a key put again at its latest place, and a
// deleted or forgotten one not at all.
func TestRecentLatest(t *testing.T) {
	r := NewRecent[int](4)
	for i, k := range []string{"a", "b", "c", "b", "d", "e"} { // "a" forgotten past the bound
		r.Put(k, i)
	}
	r.Delete("d")
	for _, tc := range []struct {
		n    int
		keys string
	}{{10, "c b e"}, {2, "b e"}, {0, ""}} {
		keys, vals := r.Latest(tc.n)
		if strings.Join(keys, " ") != tc.keys || len(vals) != len(keys) {
			t.Fatalf("Latest(%d) = %v %v; want %s", tc.n, keys, vals, tc.keys)
		}
		for i, k := range keys {
			if v, _ := r.Get(k); v != vals[i] {
				t.Fatalf("Latest(%d): %s holds %d, Get says %d", tc.n, k, vals[i], v)
			}
		}
	}
}
