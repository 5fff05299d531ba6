package history

import (
	"fmt"
	"slices"
	"strings"
	"sync"
)

// index is the tree over a snapshot's records: the winning entry of each
// id, each parent's earliest child, branch names and each branch's tip.
//
// The maps and nodes are shared along a follow chain (tree): a follow
// whose appended entries change nothing already indexed adds them in
// place instead of indexing the whole file again. An earlier snapshot
// still sees only its own entries: an entry is this index's only when its
// line is at most lines, and the maps are only added to, never changed,
// while they are shared (a node's earliest child, which only placing
// reads, is set once by the child's placing).
type index struct {
	t     *tree
	lines int               // the snapshot's last line
	tips  map[string]*entry // branch name -> last entry of its chain
	order []string          // branch names by first line
	leaf  *entry            // Pi's default leaf: last valid entry in file order
	bad   []*record         // lines that are not entries, in file order
	root  bool              // a root has been named (main is taken)
}

// tree holds the maps of one follow chain.
type tree struct {
	mu    sync.RWMutex
	owner *index           // the latest index; only it may be extended in place
	byID  map[string]*node // id -> the node of the entry that wins it
	// dangling holds parent ids no entry has: an appended entry with such
	// an id would change earlier entries' parents, so it needs a full build.
	dangling map[string]bool
	badLine  map[int]bool
}

// node is an entry's place in its tree: its parent's node (nil for a
// root or a missing parent), its earliest child in file order and its
// branch name, set when it is placed (only the nodes of entries that win
// their ids are). An entry's parent never changes within a tree (an
// append that would change one builds a new tree), so up and name are set
// once; first is set once, when the child is placed.
type node struct {
	e     *entry
	up    *node
	first *entry
	name  string
}

// Main is the branch of the first root, named even before the file has
// entries.
const Main = "main"

// build indexes records (file order) up to line lines. A repeated id:
// the later entry wins, as in Pi's _buildIndex.
func build(records []*record, lines int) *index {
	t := &tree{
		byID:     make(map[string]*node, len(records)),
		dangling: make(map[string]bool),
		badLine:  make(map[int]bool),
	}
	x := &index{t: t, lines: lines, tips: map[string]*entry{Main: nil}, order: []string{Main}}
	t.owner = x
	nodes := x.take(records)
	// Without a repeated id every entry wins its id.
	x.place(nodes, len(t.byID) < len(nodes))
	return x
}

// extend indexes records appended after prev's (file order, up to line
// lines) by adding them to prev's maps, or returns nil when that would
// not give what build gives: prev is not the latest index of its chain
// (nor of the same lines), or an appended id repeats an id of the file or
// names a missing parent.
func extend(prev *index, added []*record, lines int) *index {
	t := prev.t
	t.mu.Lock()
	defer t.mu.Unlock()
	// Another index of the same lines holds exactly what prev holds (an
	// index is what build gives for its lines): a follow that found
	// nothing appended and was dropped, as an observe drops it to keep
	// sharing prev, must not cost the next follow a full build.
	if o := t.owner; o != prev && o.lines != prev.lines {
		return nil
	}
	ids := make(map[string]bool)
	for _, r := range added {
		if r.e == nil {
			continue
		}
		id := r.e.id
		if t.byID[id] != nil || t.dangling[id] || ids[id] {
			return nil
		}
		ids[id] = true
	}
	x := &index{t: t, lines: lines, tips: make(map[string]*entry, len(prev.tips)+1),
		order: slices.Clip(prev.order), leaf: prev.leaf, bad: slices.Clip(prev.bad), root: prev.root}
	for n, e := range prev.tips {
		x.tips[n] = e
	}
	x.place(x.take(added), false)
	t.owner = x
	return x
}

// take adds records (file order) to the maps: each entry, in a new node,
// as the winner of its id (a later one replaces an earlier), each line
// that is not an entry as a notice. It returns the new nodes, file order,
// to be placed. The caller holds the tree (or is building it).
func (x *index) take(records []*record) []node {
	n := 0
	for _, r := range records {
		if r.e != nil {
			n++
		}
	}
	nodes := make([]node, 0, n)
	for _, r := range records {
		if r.e == nil {
			x.bad = append(x.bad, r)
			x.t.badLine[r.line] = true
			continue
		}
		nodes = append(nodes, node{e: r.e})
		x.t.byID[r.e.id] = &nodes[len(nodes)-1]
		x.leaf = r.e
	}
	return nodes
}

// get returns this index's winning entry for id.
func (x *index) get(id string) *entry {
	x.t.mu.RLock()
	nd := x.t.byID[id]
	x.t.mu.RUnlock()
	if nd == nil || nd.e.line > x.lines {
		return nil
	}
	return nd.e
}

// nameOf returns the branch name of one of this index's entries.
func (x *index) nameOf(e *entry) string {
	x.t.mu.RLock()
	defer x.t.mu.RUnlock()
	if nd := x.t.byID[e.id]; nd != nil && nd.e == e {
		return nd.name
	}
	return ""
}

// place places nodes (file order; with repeats, only those whose entries
// won their ids): each links to its parent's node, or marks its parent
// id missing, and is recorded as its parent's earliest child when it is
// the first to link to it. Then it is named in the same pass: the first
// root is main;
// a later root (null or missing parent) or a later child at a fork starts
// b.<id>; the earliest child in file order continues its parent's branch,
// but only when the parent precedes it in the file (so it is named
// already), so names never depend on later lines and a loop cannot
// recurse. The caller holds the tree (or is building it).
func (x *index) place(nodes []node, repeats bool) {
	t := x.t
	// The node placed before is most often the parent: it won its id, so
	// a parent id equal to its id names it.
	var prev *node
	// The tip of the branch of the node before, written to tips when the
	// branch changes: a run of one branch costs no map access.
	var run string
	var runTip *entry
	for i := range nodes {
		nd := &nodes[i]
		e := nd.e
		if repeats && t.byID[e.id] != nd {
			continue // a later entry has its id
		}
		var p *node
		if !e.root {
			if prev != nil && e.parent == prev.e.id {
				p = prev
			} else if p = t.byID[e.parent]; p == nil {
				t.dangling[e.parent] = true
			}
		}
		earliest := false
		if p != nil {
			nd.up = p
			if p.first == nil {
				p.first, earliest = e, true
			}
		}
		switch {
		case p == nil && !x.root:
			x.root = true
			nd.name = Main
		case p == nil:
			nd.name = branchName(e.id)
		case earliest && p.e.line < e.line:
			nd.name = p.name
		default:
			nd.name = branchName(e.id)
		}
		if runTip == nil || nd.name != run {
			if runTip != nil {
				x.tips[run] = runTip
			}
			if _, ok := x.tips[nd.name]; !ok {
				x.order = append(x.order, nd.name)
			}
			run = nd.name
		}
		runTip = e
		prev = nd
	}
	if runTip != nil {
		x.tips[run] = runTip
	}
}

// defaultBranch is the branch holding Pi's default leaf.
func (x *index) defaultBranch() string {
	if x.leaf == nil {
		return Main
	}
	return x.nameOf(x.leaf)
}

// item is one thing a branch shows: an entry's view or a notice, with the
// key that identifies it across snapshots.
type item struct {
	key    string
	native string
	line   int
	v      *view
	e      *entry // set for an entry: key, native and v are filled when it is cut
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
	out := make([]item, 0, len(path)+len(x.bad)+2)
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
		out = append(out, item{line: e.line, e: e})
	}
	flush(int(^uint(0) >> 1))
	return out, true
}

// path walks from tip to its root and returns it root first, with the
// notice that stopped the walk early (missing parent or loop), if any.
func (x *index) path(tip *entry) ([]*entry, *item) {
	var nd *node
	if tip != nil { // an empty main
		x.t.mu.RLock()
		nd = x.t.byID[tip.id]
		x.t.mu.RUnlock()
	}
	var rev []*entry
	var stop *item
	// While each parent precedes its child in the file the walk cannot
	// loop; the set of visited entries is needed only after a step that
	// does not go back in the file.
	var seen map[*entry]bool
	for e := tip; e != nil; {
		if len(rev) > 0 && seen == nil && e.line >= rev[len(rev)-1].line {
			seen = make(map[*entry]bool, len(rev))
			for _, r := range rev {
				seen[r] = true
			}
		}
		if seen[e] {
			last := rev[len(rev)-1]
			stop = &item{key: "x.loop." + safeID(last.id), line: last.line,
				v: noticeView(NoticeLoop, fmt.Sprintf("entry on line %d has a parent that loops back to it; history stops here", last.line))}
			break
		}
		if seen != nil {
			seen[e] = true
		}
		rev = append(rev, e)
		if e.root {
			break
		}
		// The parent's node was placed with nd, and never changes.
		p := nd.up
		if p == nil || p.e.line > x.lines {
			stop = &item{key: "x.missing." + safeID(e.id), line: e.line, v: noticeView(NoticeMissingParent, x.missingDetail(e))}
			break
		}
		e, nd = p.e, p
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
	x.t.mu.RLock()
	defer x.t.mu.RUnlock()
	for l := e.line - 1; x.t.badLine[l]; l-- {
		lines = append([]string{fmt.Sprint(l)}, lines...)
	}
	d := fmt.Sprintf("parent %s of the entry on line %d is not in the file; history stops here", cut(e.parent), e.line)
	if len(lines) > 0 {
		d += "; unreadable line " + strings.Join(lines, ", ") + " just before it likely held the parent"
	}
	return d
}
