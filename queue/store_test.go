package queue

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mosaic-agents/mosaic/internal/atomicfile"
)

func testItem(id string, seq uint64, text string) Item {
	return Item{ID: id, Seq: seq, Revision: 1, State: "queued", Request: "r-" + id, Receipt: "rc-" + id[3:],
		Fingerprint: "fp", Actor: "a", Connection: "k-1", Generation: 1, Execution: "e-1", Admitted: "t", Updated: "t",
		Payloads: []Payload{NewPayload(1, text, "a", "k-1", 1, "t")}}
}

func openTest(t *testing.T, opts ...Option) *Store {
	t.Helper()
	s, err := Open(t.TempDir(), "pi-test", opts...)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// Revisions are write-once, in a gapless run; Load returns every item's
// newest revision in admission order.
func TestWriteOnceAndLoad(t *testing.T) {
	s := openTest(t)
	b, a := testItem("qi-00000000000000b2", 2, "second"), testItem("qi-00000000000000a1", 1, "first")
	for _, it := range []Item{b, a} {
		if err := s.Write(it); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Write(a); !errors.Is(err, ErrRevisionExists) {
		t.Fatalf("second write of revision 1: %v; want ErrRevisionExists", err)
	}
	skip := a.Next()
	skip.Revision = 3
	if err := s.Write(skip); err == nil {
		t.Fatal("revision 3 written without revision 2")
	}
	next := a.Next()
	next.State = "dispatched"
	if err := s.Write(next); err != nil {
		t.Fatal(err)
	}
	items, damaged, err := s.Load()
	if err != nil || len(damaged) != 0 {
		t.Fatalf("Load: %v %v", err, damaged)
	}
	if len(items) != 2 || items[0].ID != a.ID || items[0].Revision != 2 || items[0].State != "dispatched" || items[1].ID != b.ID {
		t.Fatalf("Load = %+v", items)
	}
}

// Damage is never read as content: a revision that does not decode, a
// gap, a text that does not match its digest.
func TestDamagedItems(t *testing.T) {
	for _, tc := range []struct {
		name   string
		damage func(dir string)
	}{
		{"undecodable newest", func(dir string) { os.WriteFile(filepath.Join(dir, revisionFile(2)), []byte("{"), 0o600) }},
		{"gap", func(dir string) { os.WriteFile(filepath.Join(dir, revisionFile(3)), []byte("{}"), 0o600) }},
		{"altered text", func(dir string) {
			p := filepath.Join(dir, revisionFile(1))
			b, _ := os.ReadFile(p)
			os.WriteFile(p, []byte(strings.Replace(string(b), `"text":"frozen"`, `"text":"forged"`, 1)), 0o600)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := openTest(t)
			it := testItem("qi-00000000000000c3", 1, "frozen")
			if err := s.Write(it); err != nil {
				t.Fatal(err)
			}
			tc.damage(filepath.Join(s.Dir(), it.ID))
			items, damaged, err := s.Load()
			if err != nil || len(items) != 0 || len(damaged) != 1 || damaged[0].ID != it.ID {
				t.Fatalf("Load = %+v %+v %v; want the item damaged", items, damaged, err)
			}
		})
	}
}

// A write that fails at any step leaves no revision or the whole one,
// never a partial file under the final name.
func TestWriteFaults(t *testing.T) {
	for _, point := range []string{atomicfile.FaultTempCreated, atomicfile.FaultTempWritten, atomicfile.FaultTempSynced, atomicfile.FaultLinked, atomicfile.FaultDirSynced} {
		t.Run(point, func(t *testing.T) {
			fail := errors.New("injected ENOSPC")
			s := openTest(t, WithFault(func(p, _ string) error {
				if p == point {
					return fail
				}
				return nil
			}))
			it := testItem("qi-00000000000000d4", 1, "text")
			if err := s.Write(it); !errors.Is(err, fail) {
				t.Fatalf("Write: %v; want the injected failure", err)
			}
			items, damaged, err := s.Load()
			if err != nil || len(damaged) != 0 || len(items) > 1 || (len(items) == 1 && items[0].Current().Text != "text") {
				t.Fatalf("after a failure at %s: %+v %+v %v", point, items, damaged, err)
			}
		})
	}
}

func TestForget(t *testing.T) {
	s := openTest(t)
	it := testItem("qi-00000000000000e5", 1, "gone")
	if err := s.Write(it); err != nil {
		t.Fatal(err)
	}
	if err := s.Forget(it.ID); err != nil {
		t.Fatal(err)
	}
	if items, _, _ := s.Load(); len(items) != 0 {
		t.Fatalf("forgotten item still loads: %+v", items)
	}
	if err := s.Forget("../x"); !errors.Is(err, ErrInvalid) {
		t.Fatalf("Forget of a path: %v", err)
	}
}

func TestUserEntriesFrom(t *testing.T) {
	p := filepath.Join(t.TempDir(), "s.jsonl")
	head := `{"type":"session","id":"x"}
{"type":"message","message":{"role":"user","content":[{"type":"text","text":"one"}]}}
`
	tail := `{"type":"message","message":{"role":"assistant","content":[{"type":"text","text":"one"}]}}
{"type":"message","message":{"role":"user","content":"two"}}
{"type":"message","message":{"role":"user","content":[{"type":"text","text":"one"}]}}
not json
`
	os.WriteFile(p, []byte(head+tail), 0o600)
	all, err := UserEntriesFrom(p, 0)
	if err != nil || len(all) != 3 || all[0].Digest != Digest("one") || all[1].Digest != Digest("two") || all[2].Digest != Digest("one") {
		t.Fatalf("UserEntriesFrom(0) = %v, %v", all, err)
	}
	after, err := UserEntriesFrom(p, int64(len(head)))
	if err != nil || len(after) != 2 || after[0].Offset <= int64(len(head)) || after[1].Digest != Digest("one") {
		t.Fatalf("UserEntriesFrom(after head) = %v, %v; want only the two user messages after it", after, err)
	}
	if _, err := UserEntriesFrom(p, int64(len(head+tail))+1); !errors.Is(err, ErrSessionShorter) {
		t.Fatalf("a position past the end: %v; want ErrSessionShorter", err)
	}
	if got, err := UserEntriesFrom(filepath.Join(t.TempDir(), "none"), 0); err != nil || len(got) != 0 {
		t.Fatalf("missing file: %v %v", got, err)
	}
}

// BenchmarkWrite is the cost of one durable transition (temp file, fsync,
// link, directory fsync): what admission adds before the queued receipt.
func BenchmarkWrite(b *testing.B) {
	s, err := Open(b.TempDir(), "pi-bench")
	if err != nil {
		b.Fatal(err)
	}
	it := testItem("qi-00000000000000f6", 1, strings.Repeat("x", 1024))
	if err := s.Write(it); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for range b.N {
		it = it.Next()
		if err := s.Write(it); err != nil {
			b.Fatal(err)
		}
	}
}

// Write refuses a revision Load would reject as too large, before any of
// it reaches the disk, and Read reads back what Write stored.
func TestWriteRefusesWhatLoadRejects(t *testing.T) {
	s, err := Open(t.TempDir(), "pi-big")
	if err != nil {
		t.Fatal(err)
	}
	it := testItem("qi-00000000000000b1", 1, "small")
	if err := s.Write(it); err != nil {
		t.Fatal(err)
	}
	if got, err := s.Read(it.ID, 1); err != nil || got.Current().Text != "small" {
		t.Fatalf("Read = %v, %v", got.Current().Text, err)
	}
	big := it.Next()
	for len(big.Payloads) < 30 {
		big.Payloads = append(big.Payloads, NewPayload(len(big.Payloads)+1, strings.Repeat("\x01", 262144), "a", "k", 0, "t"))
	}
	if err := s.Write(big); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("Write of an oversized revision: %v; want ErrTooLarge", err)
	}
	if _, err := s.Read(it.ID, 2); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("the refused revision reads back: %v", err)
	}
	items, damaged, err := s.Load()
	if err != nil || len(items) != 1 || len(damaged) != 0 || items[0].Revision != 1 {
		t.Fatalf("Load after the refusal: %v %v %v", items, damaged, err)
	}
}

// Load removes an item directory that holds no revision (a crash before
// the first revision was linked) and refuses a directory with more
// entries than retention ever leaves, instead of reading without bound.
func TestLoadSweepsAndBounds(t *testing.T) {
	s, err := Open(t.TempDir(), "pi-sweep")
	if err != nil {
		t.Fatal(err)
	}
	empty := filepath.Join(s.Dir(), "qi-00000000000000e1")
	if err := os.Mkdir(empty, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := s.Write(testItem("qi-00000000000000e2", 1, "kept")); err != nil {
		t.Fatal(err)
	}
	items, damaged, err := s.Load()
	if err != nil || len(items) != 1 || len(damaged) != 0 {
		t.Fatalf("Load = %v %v %v", items, damaged, err)
	}
	if _, err := os.Stat(empty); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("the revision-less item directory is still there: %v", err)
	}
	for i := 0; i < maxEntries; i++ {
		if err := os.Mkdir(filepath.Join(s.Dir(), fmt.Sprintf("qi-%016x", 0x1000+i)), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	if _, _, err := s.Load(); !errors.Is(err, ErrTooMany) {
		t.Fatalf("Load of %d entries: %v; want ErrTooMany", maxEntries+1, err)
	}
}
