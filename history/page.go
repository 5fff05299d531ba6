package history

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"math"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/mosaic-agents/mosaic/protocol"
)

// pageReserve is kept free of parts under MaxPageBytes for the page's own
// fields and the record that carries it.
const pageReserve = 64 << 10

// Page is one CHAT-01 history page of one branch: at most MaxPageParts
// parts and MaxPageBytes of JSON.
type Page struct {
	Session       string `json:"session"`
	Branch        string `json:"branch"`
	DefaultBranch string `json:"defaultBranch"`
	Snapshot      string `json:"snapshot"`
	Epoch         string `json:"epoch,omitempty"`
	// From is the branch-wide index of the first part.
	From  int    `json:"from"`
	Parts []Part `json:"parts"`
	// More says the snapshot holds more parts of the branch; Cursor then
	// reads them. Without More, Cursor is a follow cursor: on a later
	// snapshot it returns only what was appended to the branch.
	More       bool `json:"more"`
	Incomplete bool `json:"incomplete,omitempty"`
	New        bool `json:"new,omitempty"`
	// Cursor continues after this page. It is a plain value for the
	// controller to keep (and bind to actor and connection); it is not
	// sent as is.
	Cursor Cursor `json:"-"`
}

// Cursor is where a reader stands in a branch: the parts it has read, the
// identity of those parts, and the snapshot it read them from.
type Cursor struct {
	Branch string
	// Next is the count of the branch's parts already read.
	Next int
	// Parts is the SHA-256 over the identity (entry, part, line) of parts
	// [0, Next): a later snapshot must reproduce it exactly.
	Parts  [32]byte
	Epoch  string
	Size   int64
	Digest [32]byte
}

// Page returns the page of branch ("" for the default branch) starting at
// part from. An unknown branch refuses unknown-branch (reconcile).
func (s *Snapshot) Page(branch string, from int) (Page, error) {
	if branch == "" {
		branch = s.DefaultBranch()
	}
	all, ok := s.branchParts(branch, from+MaxPageParts+1)
	if !ok {
		return Page{}, s.unknownBranch(branch)
	}
	if from < 0 || from > len(all) {
		r := protocol.Refuse(protocol.CodeCursorUnknown, "branch %q of %s has %d parts, not %d", cut(branch), s.path, len(all), from)
		r.Reconcile = true
		return Page{}, r
	}
	return s.page(branch, all, from)
}

// Next continues from a cursor. On the snapshot the cursor came from it
// is the next page; on a later snapshot of the same follow chain it
// verifies that the branch's first c.Next parts are unchanged and returns
// what follows them, which is empty when the conversation continued on
// another branch. Anything else refuses source-replaced (reconcile).
func (s *Snapshot) Next(c Cursor) (Page, error) {
	if c.Next < 0 {
		r := protocol.Refuse(protocol.CodeCursorUnknown, "a cursor of branch %q of %s counts %d parts read: it was not issued here", cut(c.Branch), s.path, c.Next)
		r.Reconcile = true
		return Page{}, r
	}
	if !s.descends(c) {
		return Page{}, Replaced(s.path, "the cursor's snapshot is not a prefix of this one")
	}
	all, ok := s.branchParts(c.Branch, c.Next+MaxPageParts+1)
	if !ok {
		return Page{}, Replaced(s.path, "branch "+cut(c.Branch)+" is gone")
	}
	if len(all) < c.Next || partsDigest(all[:c.Next]) != c.Parts {
		return Page{}, Replaced(s.path, "the earlier parts of branch "+cut(c.Branch)+" changed")
	}
	return s.page(c.Branch, all, c.Next)
}

// descends reports whether c was issued on s or on a snapshot s followed.
func (s *Snapshot) descends(c Cursor) bool {
	if c.Epoch == "" && c.Size == 0 {
		return true // a new conversation's cursor: the empty prefix
	}
	if c.Epoch != s.epoch {
		return false
	}
	if c.Size == s.size {
		return c.Digest == s.digest
	}
	for _, m := range s.lineage {
		if m.size == c.Size {
			return m.digest == c.Digest
		}
	}
	return false
}

// page fills one page from all[from:] within the caps. all holds at
// least one part past a full page when the branch has one.
func (s *Snapshot) page(branch string, all []placed, from int) (Page, error) {
	p := Page{Session: short(s.header.ID), Branch: branch, DefaultBranch: s.DefaultBranch(),
		Snapshot: s.Digest(), Epoch: s.epoch, From: from, Parts: []Part{},
		Incomplete: s.incomplete, New: s.isNew}
	ps, sizes, err := s.window(branch, from, min(len(all), from+MaxPageParts))
	if err != nil {
		return Page{}, err
	}
	used := pageReserve
	k := 0
	for ; k < len(ps); k++ {
		if used+sizes[k]+1 > MaxPageBytes && k > 0 {
			break
		}
		used += sizes[k] + 1
	}
	p.Parts = ps[:k]
	i := from + k
	p.More = i < len(all)
	p.Cursor = Cursor{Branch: branch, Next: i, Parts: partsDigest(all[:i]), Epoch: s.epoch, Size: s.size, Digest: s.digest}
	return p, nil
}

// cutting is a branch's parts as far as they were cut: items[next:] are
// not cut yet. A part is kept as its identity (entry, part, line: all a
// cursor's digest reads) and where it is whole: an entry whose part count
// the light scan knew is not decoded to be cut, and its part is filled
// from its item, decoded when a page shows it (window); the parts of the
// items cut whole are in whole. sizes holds the JSON length of the first
// parts, each encoded once per snapshot: every page measures its parts
// against MaxPageBytes, and the newest page is found among pages that
// overlap. Parts already cut never change, so callers read them without
// the lock.
type cutting struct {
	items []item
	next  int
	ids   []placed
	whole []Part
	sizes []int
}

// placed is a cut part's identity and where the part is: whole[ref], or
// for a negative ref the only part of items[-ref-1], not filled yet. A
// branch of a 10 MB session has some 12,000 parts, mostly not filled:
// this is a quarter of a Part.
type placed struct {
	entry string
	line  int
	part  int
	ref   int
}

// branchParts returns the identities of the first n parts of branch, or
// of all of them when it has fewer, cutting (and decoding) items only as
// far as needed, once per snapshot. Callers must not modify the result.
func (s *Snapshot) branchParts(branch string, n int) ([]placed, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c, ok := s.parts[branch]
	if !ok {
		items, ok := s.idx.items(branch, s.header)
		if !ok {
			return nil, false
		}
		c = &cutting{items: items, ids: []placed{}}
		if s.parts == nil {
			s.parts = make(map[string]*cutting)
		}
		s.parts[branch] = c
	}
	// The parts still wanted, bounded by the items left before any sum:
	// n is math.MaxInt for Count, and c.next+n-len(c.ids) overflows once
	// the cut has consumed items that made no part. A cut already at the
	// end has nothing left to decode.
	if left := min(n-len(c.ids), len(c.items)-c.next); left > predecodeMin {
		predecode(c.items[c.next : c.next+left])
	}
	if left := len(c.items) - c.next; n-len(c.ids) >= left {
		// Cutting to the end: most items make one part (or none), so
		// grow once rather than by doubling.
		c.ids = slices.Grow(c.ids, left)
	}
	for len(c.ids) < n && c.next < len(c.items) {
		at, it := c.next, c.items[c.next]
		c.next++
		if it.e != nil {
			switch it.e.hint {
			case hintNone:
				continue
			case hintOne:
				c.ids = append(c.ids, placed{entry: it.e.entryKey(), line: it.line, ref: -at - 1})
				continue
			}
			if !c.decode(at) {
				continue
			}
			it = c.items[at]
		}
		for _, p := range parts(it) {
			c.ids = append(c.ids, placed{entry: p.Entry, line: p.Line, part: p.Part, ref: len(c.whole)})
			c.whole = append(c.whole, p)
		}
	}
	return c.ids, true
}

// decode decodes items[at]'s entry and fills the item's view, key and
// native id; it reports whether the entry shows.
func (c *cutting) decode(at int) bool {
	it := &c.items[at]
	if it.v = it.e.shown(); it.v == nil {
		return false
	}
	it.key, it.native = it.e.entryKey(), it.e.id
	return true
}

// window returns copies of branch's parts [from, n), filled, and their
// encoded lengths (each encoded once per snapshot). n must not exceed
// what branchParts returned. A window with many parts to decode or
// measure fills them on up to four goroutines: each fills its own parts
// (and their items; a part not filled yet is its item's only part).
func (s *Snapshot) window(branch string, from, n int) ([]Part, []int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.parts[branch]
	if len(c.sizes) < n {
		c.sizes = append(c.sizes, make([]int, n-len(c.sizes))...)
	}
	out := make([]Part, n-from)
	errs := make([]error, n-from)
	fill := func(i int) {
		p, err := c.filled(i, s.path)
		if err == nil && c.sizes[i] == 0 {
			var b []byte
			if b, err = json.Marshal(p); err != nil {
				err = protocol.Wrap(protocol.CodeUnreadable, err, "encode part %d of %s", i, s.path)
			}
			c.sizes[i] = len(b)
		}
		out[i-from], errs[i-from] = p, err
	}
	work := 0
	for i := from; i < n; i++ {
		if c.ids[i].ref < 0 || c.sizes[i] == 0 {
			work++
		}
	}
	if workers := min(runtime.GOMAXPROCS(0), 4); work >= windowSplitMin && workers > 1 {
		var next atomic.Int64
		next.Store(int64(from))
		var wg sync.WaitGroup
		for range workers {
			wg.Go(func() {
				for i := int(next.Add(1) - 1); i < n; i = int(next.Add(1) - 1) {
					fill(i)
				}
			})
		}
		wg.Wait()
	} else {
		for i := from; i < n; i++ {
			fill(i)
		}
	}
	for _, err := range errs {
		if err != nil {
			return nil, nil, err
		}
	}
	return out, c.sizes[from:n:n], nil
}

// windowSplitMin is how many parts a window must decode or measure before
// it fills them on more than one goroutine (a newest page fills about a
// hundred).
const windowSplitMin = 16

// filled returns part i whole: a part cut from its hint is cut again from
// its decoded entry, which must make that one part exactly.
func (c *cutting) filled(i int, path string) (Part, error) {
	id := c.ids[i]
	if id.ref >= 0 {
		return c.whole[id.ref], nil
	}
	var ps []Part
	if c.decode(-id.ref - 1) {
		ps = parts(c.items[-id.ref-1])
	}
	if len(ps) != 1 || ps[0].Entry != id.entry || ps[0].Line != id.line {
		return Part{}, protocol.Refuse(protocol.CodeUnreadable, "line %d of %s made %d parts where its light scan promised one", id.line, path, len(ps))
	}
	return ps[0], nil
}

// partsDigest hashes the identity of parts: entry key, part number, line.
func partsDigest(ps []placed) [32]byte {
	h := sha256.New()
	var n [8]byte
	for _, p := range ps {
		binary.BigEndian.PutUint64(n[:], uint64(len(p.entry)))
		h.Write(n[:])
		h.Write([]byte(p.entry))
		binary.BigEndian.PutUint64(n[:], uint64(p.part))
		h.Write(n[:])
		binary.BigEndian.PutUint64(n[:], uint64(p.line))
		h.Write(n[:])
	}
	var d [32]byte
	h.Sum(d[:0])
	return d
}

// Count returns how many parts branch ("" for the default branch) has. An
// unknown branch refuses unknown-branch (reconcile).
func (s *Snapshot) Count(branch string) (int, error) {
	if branch == "" {
		branch = s.DefaultBranch()
	}
	all, ok := s.branchParts(branch, math.MaxInt)
	if !ok {
		return 0, s.unknownBranch(branch)
	}
	return len(all), nil
}

// Before returns the page of branch that ends just before part end: the
// longest run of parts ending there that the page caps allow, exactly the
// parts a forward page from its first part holds up to end (the newest
// page is Before(branch, Count)). More says the branch has parts at or
// after end. It carries no cursor: a forward cursor would not match a page
// cut at end.
func (s *Snapshot) Before(branch string, end int) (Page, error) {
	if branch == "" {
		branch = s.DefaultBranch()
	}
	all, ok := s.branchParts(branch, max(end, 0)+1)
	if !ok {
		return Page{}, s.unknownBranch(branch)
	}
	if end < 0 || end > len(all) {
		r := protocol.Refuse(protocol.CodeCursorUnknown, "branch %q of %s has %d parts, not %d", cut(branch), s.path, len(all), end)
		r.Reconcile = true
		return Page{}, r
	}
	first := max(0, end-MaxPageParts)
	ps, sizes, err := s.window(branch, first, end)
	if err != nil {
		return Page{}, err
	}
	// Walking back from end adds a part while a forward page from it would
	// still reach end: the first part of a page is taken whatever its size.
	start, used := end, pageReserve
	for start > first && (start == end || used+sizes[start-1-first]+1 <= MaxPageBytes) {
		start--
		used += sizes[start-first] + 1
	}
	return Page{Session: short(s.header.ID), Branch: branch, DefaultBranch: s.DefaultBranch(),
		Snapshot: s.Digest(), Epoch: s.epoch, From: start, Parts: ps[start-first:],
		More: end < len(all), Incomplete: s.incomplete, New: s.isNew}, nil
}

// unknownBranch refuses a branch snap does not have.
func (s *Snapshot) unknownBranch(branch string) *protocol.Refusal {
	r := protocol.Refuse(protocol.CodeUnknownBranch, "%s has no branch %q", s.path, cut(branch))
	r.Reconcile = true
	return r
}

// predecodeMin is how many parts a cut must still make, and items it has
// left, before its entries are decoded on every CPU first: the newest page
// and Count cut a whole branch, a forward page about a hundred parts.
const predecodeMin = 512

// predecode decodes the entries of items whose part count the light scan
// did not learn, on up to four goroutines, each through its own sync.Once
// as the cut would, so the cut after it finds them decoded. A cut that
// still wants k parts is given its next k items: all it reads when no
// entry splits into several parts, and all there are for Count and the
// newest page, which cut the whole branch.
func predecode(items []item) {
	workers := min(runtime.GOMAXPROCS(0), 4)
	if workers < 2 {
		return
	}
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := w; i < len(items); i += workers {
				if e := items[i].e; e != nil && e.hint == hintUnknown {
					e.shown()
				}
			}
		})
	}
	wg.Wait()
}
