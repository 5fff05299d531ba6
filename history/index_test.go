package history

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"math/rand/v2"
	"os"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/mosaic-agents/mosaic/protocol"
)

// lightAgrees fails unless the light scan's answer for line is what the
// full parse gives: a line it takes must be the same entry for parseLine.
func lightAgrees(t *testing.T, line []byte) bool {
	t.Helper()
	env, ok := light(line, "a")
	if !ok {
		return false
	}
	r := parseLine(2, line)
	if r == nil || r.e == nil {
		t.Fatalf("light took %q, the full parse does not: %+v", line, r)
	}
	if r.e.id != env.id || r.e.parent != env.parent || r.e.root != env.root || r.e.typ != env.typ ||
		env.key != "" && env.key != entryKey(r.e.id) {
		t.Fatalf("light took %q as %+v, the full parse as id=%q parent=%q root=%v type=%q",
			line, env, r.e.id, r.e.parent, r.e.root, r.e.typ)
	}
	if n, ok := map[partHint]int{hintNone: 0, hintOne: 1}[env.hint]; ok {
		if got := decodedParts(line); got != n {
			t.Fatalf("light promised %.300q %d parts, decoded it makes %d", line, n, got)
		}
	}
	return true
}

// decodedParts cuts line as the reader does once it decodes an entry, from
// the full parse: the light record of a state entry keeps no line to
// decode, so it would answer for the scan rather than check it.
func decodedParts(line []byte) int {
	rec := parseLine(2, line)
	if rec == nil || rec.e == nil || rec.e.view == nil {
		return 0
	}
	return len(parts(item{key: entryKey(rec.e.id), native: rec.e.id, line: 2, v: rec.e.view}))
}

func TestLightMatchesFullParse(t *testing.T) {
	takes := []string{
		msg(t, "a", "", "user", "hi"),
		msg(t, "b", "a", "assistant", "x \" \\ \u2028 é 😀 <tag>"),
		ent(t, "model_change", "c", "b", map[string]any{"provider": "p", "n": -1.5e-3}),
		ent(t, "label", "d", "c", map[string]any{"arr": []any{true, false, nil, 0, map[string]any{}, []any{}}}),
		`{"type":"message","id":"e"}`,
		`  {"type" : "x" , "id":"f","parentId":null}  ` + "\r",
		`{"ID":"g","Type":"message","PARENTID":"a"}`,
		`{"type":"","id":"h","parentId":""}`,
	}
	for _, l := range takes {
		if !lightAgrees(t, []byte(strings.TrimSuffix(l, "\n"))) {
			t.Errorf("light did not take %q", l)
		}
	}
	// Lines the light scan leaves to the full parse: it must not take them
	// (an entry it would take differently, or no entry at all).
	leaves := []string{
		``, `   `, "\v", `null`, `[]`, `{}`, `"x"`, `{"type":"message"}`,
		`{"type":"message","id":""}`,
		`{"type":"session","id":"s","version":3}`,
		`{"type":"message","id":"a","id":"b"}`,
		`{"type":"message","id":"a","Id":"b"}`,
		`{"type":"message","id":5}`,
		`{"type":null,"id":"a"}`,
		`{"type":"message","id":"a","parentId":7}`,
		`{"type":"message","id":"a\u0062"}`,
		`{"typ\u0065":"message","id":"a"}`,
		`{"type":"message","id":"a"} x`,
		`{"type":"message","id":"a",}`,
		`{"type":"message","id":"a","x":01}`,
		`{"type":"message","id":"a","x":1.}`,
		`{"type":"message","id":"a","x":"` + "\x01" + `"}`,
		`{"type":"message","id":"a","x":"\q"}`,
		`{"type":"message","id":"a","x":"\u12"}`,
		`{"type":"message","id":"a","x":tru}`,
		`{"type":"message","id":"a","x":[1,]}`,
		`{"type":"message","id":"a","x":{"k" 1}}`,
		`{"type":"message","id":"a` + "\xff" + `"}`,
		`{"type":"message","id":"a","x":` + strings.Repeat("[", 600) + strings.Repeat("]", 600) + `}`,
	}
	for _, l := range leaves {
		if lightAgrees(t, []byte(l)) {
			t.Errorf("light took %q", l)
		}
	}
}

// TestLightAgreesOnMutations mutates real entry lines byte by byte: the
// light scan may refuse any of them but must never take one differently
// from the full parse.
func TestLightAgreesOnMutations(t *testing.T) {
	rng := rand.New(rand.NewPCG(18, 2))
	seeds := []string{
		msg(t, "a1", "root", "assistant", `say "hi" \ there`),
		ent(t, "compaction", "c1", "a1", map[string]any{"summary": "s", "n": []any{1, 2.5, -3e2, true, nil}}),
		`{"type":"message","id":"x","parentId":null,"message":{"role":"user","content":"\u00e9\n"}}`,
		`{"type":"message","id":"c","message":{"role":"custom","display":false,"content":[{"type":"text","text":"t"},{"type":"toolCall","arguments":{"a":1}}]},"Message":null}`,
		`{"type":"custom_message","id":"m","display":true,"content":"x","customType":"c"}`,
	}
	alphabet := []byte(`{}[]":,\ 0123456789-+.eEtrufalsnIdDTYPpicomCM` + "\x00\x1f\x7f\xc3\xa9\xff\t\r")
	taken := 0
	for range 20000 {
		b := []byte(strings.TrimSuffix(seeds[rng.IntN(len(seeds))], "\n"))
		for range 1 + rng.IntN(3) {
			i := rng.IntN(len(b) + 1)
			switch rng.IntN(3) {
			case 0: // insert
				b = append(b[:i], append([]byte{alphabet[rng.IntN(len(alphabet))]}, b[i:]...)...)
			case 1: // delete
				if i < len(b) {
					b = append(b[:i], b[i+1:]...)
				}
			default: // replace
				if i < len(b) {
					b[i] = alphabet[rng.IntN(len(alphabet))]
				}
			}
		}
		if lightAgrees(t, b) {
			taken++
		}
	}
	if taken == 0 {
		t.Fatal("no mutated line was taken: the test checks nothing")
	}
}

func FuzzLight(f *testing.F) {
	f.Add([]byte(`{"type":"message","id":"a","parentId":null,"message":{"role":"user","content":"x"}}`))
	f.Add([]byte(`{"type":"label","id":"b","parentId":"a","x":[1,{"y":"\u00e9"}]}`))
	f.Add([]byte(`{"type":"message","id":"c","message":{"role":"custom","display":true,"content":[{"type":"text","text":"t"}]}}`))
	f.Add([]byte(`{"type":"message","id":"d","message":{"ROLE":"user","content":[{"type":"toolCall","arguments":[1]},2]}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		if bytes.IndexByte(b, '\n') >= 0 {
			return
		}
		lightAgrees(t, b)
	})
}

// fullDecode is the reader without the light scan: every line of the
// file decoded by parseLine, the index built once.
func fullDecode(t *testing.T, path string) *Snapshot {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	end := bytes.LastIndexByte(data, '\n') + 1
	s := &Snapshot{path: path, size: int64(end), incomplete: end < len(data)}
	s.digest = sha256.Sum256(data[:end])
	for i, l := range bytes.SplitAfter(data[:end], []byte("\n")) {
		if len(l) == 0 {
			continue
		}
		l = l[:len(l)-1]
		if i == 0 {
			if s.header, err = parseHeader(l, path); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if r := parseLine(i+1, l); r != nil {
			s.records = append(s.records, r)
		}
		s.nlines = i + 1
	}
	s.idx = build(s.records, s.nlines)
	return s
}

// served is everything a snapshot serves, for comparing two of them.
type served struct {
	Leaf, Default string
	Branches      []Branch
	IDs           []string
	Parts         map[string][]Part
	Incomplete    bool
	Size          int64
	Digest        string
}

func serve(t *testing.T, s *Snapshot) served {
	t.Helper()
	v := served{Leaf: s.LeafID(), Default: s.DefaultBranch(), Branches: s.Branches(), IDs: s.EntryIDs(),
		Parts: map[string][]Part{}, Incomplete: s.Incomplete(), Size: s.Size(), Digest: s.Digest()}
	for _, b := range v.Branches {
		v.Parts[b.Name] = allParts(t, s, b.Name)
	}
	return v
}

func sameServed(t *testing.T, what string, got, want served) {
	t.Helper()
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("%s differs from the full decode:\n got  %+v\n want %+v", what, got, want)
	}
}

// session grows a random session file: new turns, forks, repeated ids,
// entries that an earlier entry named as its missing parent, parents that
// come later, malformed and blank lines, state entries, lines split over
// two appends.
type session struct {
	t    *testing.T
	rng  *rand.Rand
	ids  []string
	miss []string // parent ids used before any entry had them
	n    int
}

func (g *session) next() string {
	t, rng := g.t, g.rng
	g.n++
	id := fmt.Sprintf("e%d", g.n)
	parent := ""
	if len(g.ids) > 0 {
		parent = g.ids[len(g.ids)-1]
		if rng.IntN(5) == 0 {
			parent = g.ids[rng.IntN(len(g.ids))] // a fork
		}
	}
	switch rng.IntN(14) {
	case 0:
		if len(g.ids) > 0 {
			id = g.ids[rng.IntN(len(g.ids))] // a repeated id
		}
	case 1:
		p := fmt.Sprintf("later%d", g.n)
		g.miss = append(g.miss, p)
		parent = p // a parent that is not there yet
	case 2:
		if len(g.miss) > 0 {
			id = g.miss[0] // the missing parent arrives
			g.miss = g.miss[1:]
		}
	case 3:
		return `{"type":"message","id":` + "\n" // malformed
	case 4:
		return "  \n"
	case 5:
		return ent(t, "model_change", id, parent, map[string]any{"provider": "p"})
	case 6:
		return ent(t, "custom_message", id, parent, map[string]any{"display": rng.IntN(2) == 0, "customType": "c", "content": "shown"})
	case 7:
		parent = "" // another root
	case 8:
		parent = id // a loop on itself
	}
	g.ids = append(g.ids, id)
	text := strings.Repeat("word ", rng.IntN(200))
	return msg(t, id, parent, []string{"user", "assistant"}[rng.IntN(2)], text)
}

// TestIndexMatchesFullDecode reads random sessions with the light index
// and through follows after every append, and compares every branch's
// pages, the leaf and the entry ids with a full decode of the same file;
// an earlier snapshot of the chain must still serve what it served.
func TestIndexMatchesFullDecode(t *testing.T) {
	for seed := range uint64(12) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			f := newFixture(t)
			g := &session{t: t, rng: rand.New(rand.NewPCG(seed, 18))}
			f.write(t, hdr)
			prev := f.mustRead(t)
			var held string // the first half of a line split over two appends
			for step := range 40 {
				var add strings.Builder
				add.WriteString(held)
				held = ""
				for range 1 + g.rng.IntN(4) {
					add.WriteString(g.next())
				}
				if g.rng.IntN(6) == 0 {
					l := g.next()
					cut := len(l) / 2
					add.WriteString(l[:cut])
					held = l[cut:]
				}
				f.append(t, add.String())
				before := serve(t, prev)
				next, err := f.follow(t, prev)
				if err != nil {
					t.Fatalf("step %d: Follow: %v", step, err)
				}
				want := serve(t, fullDecode(t, f.path))
				sameServed(t, fmt.Sprintf("step %d: the follow", step), serve(t, next), want)
				sameServed(t, fmt.Sprintf("step %d: a fresh read", step), serve(t, f.mustRead(t)), want)
				sameServed(t, fmt.Sprintf("step %d: the snapshot followed", step), serve(t, prev), before)
				if step%7 == 3 {
					// A second follow of the same snapshot cannot extend the
					// chain in place (the first did): it must index afresh.
					again, err := f.follow(t, prev)
					if err != nil {
						t.Fatalf("step %d: second Follow: %v", step, err)
					}
					sameServed(t, fmt.Sprintf("step %d: a second follow of one snapshot", step), serve(t, again), want)
					sameServed(t, fmt.Sprintf("step %d: the first follow after the second", step), serve(t, next), want)
				}
				prev = next
			}
		})
	}
}

// TestFollowPrefixCheckedPastFirstPiece rewrites, truncates and regrows a
// session bigger than one prefix piece, at places the first piece does
// not hold: every change under the prefix is source-replaced.
func TestFollowPrefixCheckedPastFirstPiece(t *testing.T) {
	var b strings.Builder
	b.WriteString(hdr)
	parent := ""
	for i := 0; b.Len() < 3*prefixPiece; i++ {
		id := fmt.Sprintf("m%d", i)
		b.WriteString(msg(t, id, parent, "user", strings.Repeat("x", 500)))
		parent = id
	}
	orig := b.String()
	cases := []struct {
		name string
		edit func(string) string
	}{
		{"byte in the last piece", func(s string) string {
			i := len(s) - 100
			return s[:i] + "y" + s[i+1:]
		}},
		{"byte just past the first piece", func(s string) string {
			i := prefixPiece + 10
			for s[i] != 'x' {
				i++
			}
			return s[:i] + "y" + s[i+1:]
		}},
		{"byte rewritten and the file grown", func(s string) string {
			i := 2*prefixPiece + 3
			for s[i] != 'x' {
				i++
			}
			return s[:i] + "z" + s[i+1:] + msg(t, "more", "", "user", "more")
		}},
		{"truncated", func(s string) string { return s[:len(s)-1000] }},
		{"truncated and regrown to the same size", func(s string) string {
			cut := s[:len(s)-1000]
			return cut + strings.Repeat(" ", 999) + "\n"
		}},
		{"last LF gone", func(s string) string { return s[:len(s)-1] + " " }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := newFixture(t)
			f.write(t, orig)
			prev := f.mustRead(t)
			// The file is written in place (same inode), as a foreign
			// writer would, not replaced.
			fh, err := os.OpenFile(f.path, os.O_WRONLY|os.O_TRUNC, 0)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := fh.WriteString(c.edit(orig)); err != nil {
				t.Fatal(err)
			}
			fh.Close()
			_, err = f.follow(t, prev)
			wantCode(t, err, protocol.CodeSourceReplaced)
		})
	}
}

// TestFollowWhilePaging pages every earlier snapshot of a chain while the
// chain is followed and its index extended in place (run with -race):
// each snapshot keeps serving exactly what it served when it was taken.
func TestFollowWhilePaging(t *testing.T) {
	f := newFixture(t)
	f.write(t, hdr+msg(t, "r", "", "user", "root"))
	prev := f.mustRead(t)
	type taken struct {
		s    *Snapshot
		want served
	}
	snaps := []taken{{prev, serve(t, prev)}}
	done, stop := make(chan struct{}), make(chan struct{})
	errs := make(chan string, 1)
	k := snaps[0] // not read from snaps in the goroutine: the loop below appends to it
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			default:
			}
			if got := serveQuiet(k.s); !reflect.DeepEqual(got, k.want) {
				errs <- fmt.Sprintf("the first snapshot changed while the chain was followed: %+v", got)
				return
			}
		}
	}()
	parent := "r"
	for i := range 60 {
		id := fmt.Sprintf("c%d", i)
		if i%9 == 4 {
			parent = "r" // a fork
		}
		f.append(t, msg(t, id, parent, "assistant", "more"))
		parent = id
		next, err := f.follow(t, prev)
		if err != nil {
			t.Fatal(err)
		}
		snaps = append(snaps, taken{next, serve(t, next)})
		prev = next
	}
	close(stop)
	<-done
	select {
	case e := <-errs:
		t.Fatal(e)
	default:
	}
	for i, k := range snaps {
		sameServed(t, fmt.Sprintf("snapshot %d after the chain grew", i), serve(t, k.s), k.want)
	}
}

// serveQuiet is serve for a goroutine that is not the test's: no Fatal.
func serveQuiet(s *Snapshot) served {
	v := served{Leaf: s.LeafID(), Default: s.DefaultBranch(), Branches: s.Branches(), IDs: s.EntryIDs(),
		Parts: map[string][]Part{}, Incomplete: s.Incomplete(), Size: s.Size(), Digest: s.Digest()}
	for _, b := range v.Branches {
		all := []Part{}
		p, err := s.Page(b.Name, 0)
		for err == nil {
			all = append(all, p.Parts...)
			if !p.More {
				break
			}
			p, err = s.Next(p.Cursor)
		}
		v.Parts[b.Name] = all
	}
	return v
}

// TestFollowPrefixCheckedAcrossChunks rewrites or truncates a session
// whose snapshot was reached by many follows (its bytes kept in many
// chunks, a compared piece spanning several): still source-replaced.
func TestFollowPrefixCheckedAcrossChunks(t *testing.T) {
	edits := map[string]func(b []byte) []byte{
		"byte rewritten": func(b []byte) []byte {
			i := bytes.LastIndex(b, []byte("turn 17"))
			b[i+5] = '9'
			return b
		},
		"truncated": func(b []byte) []byte { return b[:len(b)/2] },
		"truncated and regrown": func(b []byte) []byte {
			return append(b[:len(b)/2], bytes.Repeat([]byte(" "), len(b)-len(b)/2)...)
		},
	}
	for name, edit := range edits {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t)
			f.write(t, hdr)
			prev := f.mustRead(t)
			parent := ""
			for i := range 30 {
				id := fmt.Sprintf("t%d", i)
				f.append(t, msg(t, id, parent, "user", fmt.Sprintf("turn %d", i)))
				parent = id
				next, err := f.follow(t, prev)
				if err != nil {
					t.Fatal(err)
				}
				prev = next
			}
			if len(prev.chunks) < 30 {
				t.Fatalf("the chain kept %d chunks; the test needs one per follow", len(prev.chunks))
			}
			b, err := os.ReadFile(f.path)
			if err != nil {
				t.Fatal(err)
			}
			fh, err := os.OpenFile(f.path, os.O_WRONLY|os.O_TRUNC, 0)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := fh.Write(edit(b)); err != nil {
				t.Fatal(err)
			}
			fh.Close()
			_, err = f.follow(t, prev)
			wantCode(t, err, protocol.CodeSourceReplaced)
		})
	}
}

// TestSplitReadMatchesFullDecode reads random sessions big enough that
// their lines are scanned in pieces at once, and compares what they serve
// with a full decode: the pieces' records, line numbers and the header
// must join exactly as one scan would have taken them.
func TestSplitReadMatchesFullDecode(t *testing.T) {
	if runtime.GOMAXPROCS(0) < 2 {
		t.Skip("one CPU: a read is never scanned in pieces")
	}
	for seed := range uint64(3) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			f := newFixture(t)
			g := &session{t: t, rng: rand.New(rand.NewPCG(seed, 7))}
			var sb strings.Builder
			sb.WriteString(hdr)
			for sb.Len() < splitMin*3/2 {
				sb.WriteString(g.next())
			}
			f.write(t, sb.String())
			if len(pieces([]byte(sb.String()))) < 4 {
				t.Fatal("the session is not scanned in pieces: the test checks nothing")
			}
			// Every branch but a few paged: serving all of a forking
			// session's branches costs minutes under the race detector.
			got, want := f.mustRead(t), fullDecode(t, f.path)
			if !reflect.DeepEqual(got.Branches(), want.Branches()) || !reflect.DeepEqual(got.EntryIDs(), want.EntryIDs()) ||
				got.LeafID() != want.LeafID() || got.Digest() != want.Digest() {
				t.Fatal("a split read indexes the session differently from the full decode")
			}
			bs := want.Branches()
			for _, b := range []Branch{bs[0], bs[len(bs)/2], bs[len(bs)-1]} {
				if !reflect.DeepEqual(allParts(t, got, b.Name), allParts(t, want, b.Name)) {
					t.Fatalf("a split read serves branch %s differently from the full decode", b.Name)
				}
			}
		})
	}
}

// TestFollowAfterADroppedFollow: an observe follows the snapshot it
// shares and drops the result when nothing was appended, so the next
// follow starts again from the shared one. That follow still extends the
// chain's index in place (a full build costs two line splits of the
// file), and serves what a full decode serves.
func TestFollowAfterADroppedFollow(t *testing.T) {
	f := newFixture(t)
	f.write(t, hdr+msg(t, "r", "", "user", "root"))
	shared := f.mustRead(t)
	before := serve(t, shared)
	for i := range 3 {
		same, err := f.follow(t, shared)
		if err != nil {
			t.Fatal(err)
		}
		if same.Digest() != shared.Digest() || len(same.Appended()) != 0 {
			t.Fatal("a follow of an unchanged file found something new")
		}
		id := fmt.Sprintf("c%d", i)
		f.append(t, msg(t, id, "r", "assistant", "more"))
		next, err := f.follow(t, shared)
		if err != nil {
			t.Fatal(err)
		}
		if next.idx.t != shared.idx.t {
			t.Fatalf("round %d: the follow after a dropped one indexed the whole file again", i)
		}
		sameServed(t, "the follow after a dropped one", serve(t, next), serve(t, fullDecode(t, f.path)))
		sameServed(t, "the shared snapshot", serve(t, shared), before)
		sameServed(t, "the dropped follow", serve(t, same), before)
		shared, before = next, serve(t, next)
	}
}

// TestFollowChainHoldsWhatAReadHolds: a chain followed one small append
// at a time (the session watch, an observe after each turn) keeps about
// the memory one Read of the file keeps, not a read buffer per follow.
func TestFollowChainHoldsWhatAReadHolds(t *testing.T) {
	heap := func() int64 {
		runtime.GC()
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return int64(m.HeapAlloc)
	}
	f := newFixture(t)
	f.write(t, hdr+msg(t, "r", "", "user", "root"))
	chain := f.mustRead(t)
	parent := "r"
	for i := range 1000 {
		id := fmt.Sprintf("c%d", i)
		f.append(t, msg(t, id, parent, "assistant", "more"))
		parent = id
		next, err := f.follow(t, chain)
		if err != nil {
			t.Fatal(err)
		}
		chain = next
	}
	with := heap()
	runtime.KeepAlive(chain)
	without := heap()
	read := f.mustRead(t)
	withRead := heap()
	runtime.KeepAlive(read)
	held, readHeld := with-without, withRead-without
	t.Logf("a %d-byte file: the chain's snapshot holds %d bytes, a Read %d", read.Size(), held, readHeld)
	if held > 2*readHeld {
		t.Fatalf("after 1000 follows the chain holds %d bytes, a Read of the same file %d", held, readHeld)
	}
}

// naming is the tree as the reader named it before nodes: the winner of
// each id, each parent id's earliest child and each entry's branch name in
// maps, each path walked by looking the parent id up. It is the reference
// the nodes, their shortcuts and the follow's extension in place must
// give.
type naming struct {
	names map[*entry]string
	tips  map[string]*entry
	order []string
	paths map[string][]*entry
	stops map[string]string
}

func nameNaively(records []*record) naming {
	byID, first := map[string]*entry{}, map[string]*entry{}
	n := naming{names: map[*entry]string{}, tips: map[string]*entry{Main: nil}, order: []string{Main},
		paths: map[string][]*entry{}, stops: map[string]string{}}
	for _, r := range records {
		if r.e != nil {
			byID[r.e.id] = r.e
		}
	}
	var winners []*entry
	for _, r := range records {
		if r.e != nil && byID[r.e.id] == r.e {
			winners = append(winners, r.e)
		}
	}
	for _, e := range winners {
		if p := byID[e.parent]; !e.root && p != nil && first[p.id] == nil {
			first[p.id] = e
		}
	}
	root := false
	for _, e := range winners {
		var p *entry
		if !e.root {
			p = byID[e.parent]
		}
		var name string
		switch {
		case p == nil && !root:
			root, name = true, Main
		case p == nil:
			name = branchName(e.id)
		case first[p.id] == e && p.line < e.line:
			name = n.names[p]
		default:
			name = branchName(e.id)
		}
		n.names[e] = name
		if _, ok := n.tips[name]; !ok {
			n.order = append(n.order, name)
		}
		n.tips[name] = e
	}
	for name, tip := range n.tips {
		seen := map[*entry]bool{}
		var rev []*entry
		for e := tip; e != nil; {
			if seen[e] {
				n.stops[name] = "loop"
				break
			}
			seen[e] = true
			rev = append(rev, e)
			if e.root {
				break
			}
			if e = byID[e.parent]; e == nil {
				n.stops[name] = "missing"
			}
		}
		slices.Reverse(rev)
		n.paths[name] = rev
	}
	return n
}

// sameNaming fails unless s's index names, orders and walks its branches
// as nameNaively does over s's records.
func sameNaming(t *testing.T, what string, s *Snapshot) {
	t.Helper()
	want := nameNaively(s.records)
	x := s.idx
	if !reflect.DeepEqual(x.order, want.order) || !reflect.DeepEqual(x.tips, want.tips) {
		t.Fatalf("%s: branches %v tips %v, want %v %v", what, x.order, x.tips, want.order, want.tips)
	}
	for e, name := range want.names {
		if got := x.nameOf(e); got != name {
			t.Fatalf("%s: the entry on line %d is on branch %q, want %q", what, e.line, got, name)
		}
	}
	for name, tip := range x.tips {
		path, stop := x.path(tip)
		got := ""
		if stop != nil {
			got = strings.Split(stop.key, ".")[1]
		}
		if len(path) == 0 {
			path = nil
		}
		if !reflect.DeepEqual(path, want.paths[name]) || got != want.stops[name] {
			t.Fatalf("%s: branch %s walks %d entries (stop %q), want %d (stop %q)", what, name, len(path), got, len(want.paths[name]), want.stops[name])
		}
	}
}

// TestTreeMatchesNaiveNaming grows random sessions (forks, repeated ids,
// missing parents that arrive later, loops, roots) append by append and
// holds every snapshot's tree, read afresh or extended in place by a
// follow, and the snapshots it followed, to the naive naming.
func TestTreeMatchesNaiveNaming(t *testing.T) {
	for seed := range uint64(16) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			f := newFixture(t)
			g := &session{t: t, rng: rand.New(rand.NewPCG(seed, 43))}
			f.write(t, hdr)
			prev := f.mustRead(t)
			var chain []*Snapshot
			for step := range 60 {
				var add strings.Builder
				for range 1 + g.rng.IntN(5) {
					add.WriteString(g.next())
				}
				f.append(t, add.String())
				next, err := f.follow(t, prev)
				if err != nil {
					t.Fatalf("step %d: Follow: %v", step, err)
				}
				sameNaming(t, fmt.Sprintf("step %d: the follow", step), next)
				sameNaming(t, fmt.Sprintf("step %d: a fresh read", step), f.mustRead(t))
				chain = append(chain, next)
				prev = next
			}
			for i, s := range chain {
				sameNaming(t, fmt.Sprintf("snapshot %d of the chain, after it grew", i), s)
			}
		})
	}
}
