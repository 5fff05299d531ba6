package history

import (
	"fmt"
	"strings"
)

// index is the tree over a snapshot's records: the winning entry of each
// id, children in file order, branch names and each branch's tip.
type index struct {
	byID     map[string]*entry
	children map[string][]*entry
	names    map[*entry]string
	tips     map[string]*entry // branch name -> last entry of its chain
	order    []string          // branch names by first line
	leaf     *entry            // Pi's default leaf: last valid entry in file order
	bad      []*record         // lines that are not entries, in file order
	badLine  map[int]bool
}

// Main is the branch of the first root, named even before the file has
// entries.
const Main = "main"

// build indexes records (file order). A repeated id: the later entry wins,
// as in Pi's _buildIndex.
func build(records []*record) *index {
	x := &index{
		byID:     make(map[string]*entry),
		children: make(map[string][]*entry),
		names:    make(map[*entry]string),
		tips:     map[string]*entry{Main: nil},
		order:    []string{Main},
		badLine:  make(map[int]bool),
	}
	for _, r := range records {
		if r.e == nil {
			x.bad = append(x.bad, r)
			x.badLine[r.line] = true
			continue
		}
		x.byID[r.e.id] = r.e
		x.leaf = r.e
	}
	var winners []*entry
	for _, r := range records {
		if r.e != nil && x.byID[r.e.id] == r.e {
			winners = append(winners, r.e)
		}
	}
	for _, e := range winners {
		if p := x.parentOf(e); p != nil {
			x.children[p.id] = append(x.children[p.id], e)
		}
	}
	x.name(winners)
	return x
}

// parentOf returns e's parent entry, or nil for a root or a missing parent.
func (x *index) parentOf(e *entry) *entry {
	if e.root {
		return nil
	}
	return x.byID[e.parent]
}

// name assigns branch names in one pass over file order. The first root
// is main; a later root (null or missing parent) or a later child at a
// fork starts b.<id>; the earliest child in file order continues its
// parent's branch, but only when the parent precedes it in the file, so
// names never depend on later lines and a loop cannot recurse.
func (x *index) name(winners []*entry) {
	seenRoot := false
	for _, e := range winners {
		var n string
		p := x.parentOf(e)
		switch {
		case p == nil && !seenRoot:
			seenRoot = true
			n = Main
		case p == nil:
			n = branchName(e.id)
		case x.children[p.id][0] == e && p.line < e.line:
			n = x.names[p]
		default:
			n = branchName(e.id)
		}
		x.names[e] = n
		if _, ok := x.tips[n]; !ok {
			x.order = append(x.order, n)
		}
		x.tips[n] = e
	}
}

// defaultBranch is the branch holding Pi's default leaf.
func (x *index) defaultBranch() string {
	if x.leaf == nil {
		return Main
	}
	return x.names[x.leaf]
}

// item is one thing a branch shows: an entry's view or a notice, with the
// key that identifies it across snapshots.
type item struct {
	key    string
	native string
	line   int
	v      *view
}

// items lists what branch shows, root first: the path from the root to
// the branch tip, lines that are not entries at their file positions (on
// every branch, after the tip too), and notices where the path stops.
func (x *index) items(branch string, h Header) ([]item, bool) {
	tip, ok := x.tips[branch]
	if !ok {
		return nil, false
	}
	path, stop := x.path(tip)
	var out []item
	if h.ParentSession != "" {
		out = append(out, item{key: "x.forked", line: 1, v: noticeView(NoticeForked,
			"forked from an earlier session, which is not opened")})
	}
	bad := x.bad
	flush := func(before int) {
		for len(bad) > 0 && bad[0].line < before {
			r := bad[0]
			out = append(out, item{key: fmt.Sprintf("x.%d", r.line), line: r.line, v: &view{kind: KindNotice, notice: r.bad}})
			bad = bad[1:]
		}
	}
	for i, e := range path {
		flush(e.line)
		if i == 0 && stop != nil {
			out = append(out, *stop)
		}
		if e.view != nil {
			out = append(out, item{key: entryKey(e.id), native: e.id, line: e.line, v: e.view})
		}
	}
	flush(int(^uint(0) >> 1))
	return out, true
}

// path walks from tip to its root and returns it root first, with the
// notice that stopped the walk early (missing parent or loop), if any.
func (x *index) path(tip *entry) ([]*entry, *item) {
	var rev []*entry
	var stop *item
	seen := make(map[*entry]bool)
	for e := tip; e != nil; {
		if seen[e] {
			last := rev[len(rev)-1]
			stop = &item{key: "x.loop." + safeID(last.id), line: last.line,
				v: noticeView(NoticeLoop, fmt.Sprintf("entry on line %d has a parent that loops back to it; history stops here", last.line))}
			break
		}
		seen[e] = true
		rev = append(rev, e)
		if e.root {
			break
		}
		p := x.byID[e.parent]
		if p == nil {
			stop = &item{key: "x.missing." + safeID(e.id), line: e.line, v: noticeView(NoticeMissingParent, x.missingDetail(e))}
			break
		}
		e = p
	}
	for i, j := 0, len(rev)-1; i < j; i, j = i+1, j-1 {
		rev[i], rev[j] = rev[j], rev[i]
	}
	return rev, stop
}

// missingDetail names unreadable lines just before e as the likely place
// of its parent.
func (x *index) missingDetail(e *entry) string {
	var lines []string
	for l := e.line - 1; x.badLine[l]; l-- {
		lines = append([]string{fmt.Sprint(l)}, lines...)
	}
	d := fmt.Sprintf("parent %s of the entry on line %d is not in the file; history stops here", cut(e.parent), e.line)
	if len(lines) > 0 {
		d += "; unreadable line " + strings.Join(lines, ", ") + " just before it likely held the parent"
	}
	return d
}
