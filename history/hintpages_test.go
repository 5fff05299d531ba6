package history

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"sync"
	"testing"
)

// bigLine builds a message line of about size bytes with up to 64 blocks.
func bigLine(rng *rand.Rand, id string, size int, valid bool) string {
	fills := []string{"<", "x", "é", `\u003c`, `\ud83d\ude00`, `\\`, `\u2028`, "😀"}
	if !valid {
		fills = append(fills, "\xff", "\xc3")
	}
	nb := 1 + rng.IntN(64)
	per := size / nb
	var b strings.Builder
	b.WriteString(`{"type":"message","id":"` + id + `","message":{"role":"assistant","content":[`)
	for i := range nb {
		if i > 0 {
			b.WriteByte(',')
		}
		var s strings.Builder
		for s.Len() < per-80 {
			s.WriteString(fills[rng.IntN(len(fills))])
		}
		switch rng.IntN(4) {
		case 0:
			b.WriteString(`{"type":"text","text":"` + s.String() + `"}`)
		case 1:
			b.WriteString(`{"type":"thinking","thinking":"` + s.String() + `"}`)
		case 2:
			b.WriteString(`{"type":"toolCall","id":"` + strings.Repeat("<", rng.IntN(2000)) + `","name":"n","arguments":{"a":"` + s.String() + `"}}`)
		default:
			b.WriteString(`{"type":"image","mimeType":"` + s.String() + `"}`)
		}
	}
	b.WriteString(`]}}`)
	return b.String()
}

// TestHintsAtTheBounds builds message lines just under the hint bounds, of
// up to 64 blocks of the characters that escape longest, invalid bytes and
// escapes, and holds the light scan's promise of one part to the decode.
func TestHintsAtTheBounds(t *testing.T) {
	rng := rand.New(rand.NewPCG(59, 1))
	hinted := 0
	for range 40 {
		valid := rng.IntN(2) == 0
		lim := hintBytes
		if valid {
			lim = hintValidBytes
		}
		size := lim - rng.IntN(2000)
		seed := rng.Uint64()
		l := bigLine(rand.New(rand.NewPCG(seed, 0)), "a", size, valid)
		for len(l) > lim {
			size -= len(l) - lim + 100
			l = bigLine(rand.New(rand.NewPCG(seed, 0)), "a", size, valid)
		}
		if !lightAgrees(t, []byte(l)) {
			continue
		}
		if env, _ := light([]byte(l), ""); env.hint == hintOne {
			hinted++
		}
	}
	if hinted == 0 {
		t.Fatal("no line at the bounds was hinted: the test checks nothing")
	}
}

// TestPagesAtEveryEndMatchFullDecode compares Before at every end and Page
// at every from, on every branch of random sessions with hinted lines and
// lines cut into several parts, with the reader without the light scan.
func TestPagesAtEveryEndMatchFullDecode(t *testing.T) {
	for seed := range uint64(3) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			f := newFixture(t)
			g := &session{t: t, rng: rand.New(rand.NewPCG(seed, 59))}
			var b strings.Builder
			b.WriteString(hdr)
			for i := range 150 {
				if i%17 == 5 {
					b.WriteString(bigLine(g.rng, fmt.Sprintf("big%d", i), 5000+g.rng.IntN(600<<10), g.rng.IntN(2) == 0) + "\n")
					continue
				}
				b.WriteString(g.next())
			}
			f.write(t, b.String())
			s, want := f.mustRead(t), fullDecode(t, f.path)
			for _, br := range want.Branches() {
				n, err := s.Count(br.Name)
				if err != nil {
					t.Fatal(err)
				}
				m, _ := want.Count(br.Name)
				if n != m {
					t.Fatalf("count %d want %d", n, m)
				}
				for end := 0; end <= n; end++ {
					p, err := s.Before(br.Name, end)
					if err != nil {
						t.Fatal(err)
					}
					q, _ := want.Before(br.Name, end)
					if !samePage(p, q) {
						t.Fatalf("Before(%s, %d) differs", br.Name, end)
					}
					p, err = s.Page(br.Name, end)
					if err != nil {
						t.Fatal(err)
					}
					q, _ = want.Page(br.Name, end)
					if !samePage(p, q) {
						t.Fatalf("Page(%s, %d) differs", br.Name, end)
					}
				}
			}
		})
	}
}

// TestConcurrentCountAndPages runs Count, Before, Page and Next at once on
// one fresh snapshot whose parts are cut from hints and filled by pages.
func TestConcurrentCountAndPages(t *testing.T) {
	for round := range 4 {
		f := newFixture(t)
		var b strings.Builder
		b.WriteString(hdr)
		parent := ""
		for i := range 3000 {
			id := fmt.Sprintf("e%d", i)
			if i%9 == 4 {
				b.WriteString(ent(t, "message", id, parent, map[string]any{"message": map[string]any{"role": "custom", "display": i%2 == 0, "content": "c"}}))
			} else {
				b.WriteString(msg(t, id, parent, "user", id))
			}
			parent = id
		}
		f.write(t, b.String())
		s := f.mustRead(t)
		want := fullDecode(t, f.path)
		total, err := want.Count("")
		if err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		for w := range 8 {
			wg.Go(func() {
				switch (w + round) % 4 {
				case 0:
					n, err := s.Count("")
					if err != nil || n != total {
						t.Errorf("Count: %d, %v; want %d", n, err, total)
						return
					}
					p, err := s.Before("", n)
					if err != nil {
						t.Error(err)
						return
					}
					q, _ := want.Before("", n)
					if !samePage(p, q) {
						t.Error("newest page differs")
					}
				case 1:
					p, err := s.Page("", 0)
					for err == nil && p.More {
						q, _ := want.Page("", p.Cursor.Next)
						if p, err = s.Next(p.Cursor); err == nil && !samePage(p, q) {
							t.Errorf("the page from %d differs", q.From)
							return
						}
					}
					if err != nil {
						t.Error(err)
					}
				case 2:
					for end := total; end > 0; end -= 37 {
						p, err := s.Before("", end)
						if q, _ := want.Before("", end); err != nil || !samePage(p, q) {
							t.Errorf("the page before %d differs: %v", end, err)
							return
						}
					}
				default:
					for from := 0; from < total; from += 151 {
						p, err := s.Page("", from)
						if q, _ := want.Page("", from); err != nil || !samePage(p, q) {
							t.Errorf("the page from %d differs: %v", from, err)
							return
						}
					}
				}
			})
		}
		wg.Wait()
	}
}

func samePage(p, q Page) bool {
	return reflect.DeepEqual(p.Parts, q.Parts) && p.From == q.From && p.More == q.More &&
		p.Cursor.Next == q.Cursor.Next && p.Cursor.Parts == q.Cursor.Parts
}

// TestHintsOnTokenMutations mutates message lines with the tokens a hint
// turns on (folded and repeated keys, roles, content shapes, non-ASCII
// folds) and holds every line the light scan takes to the full parse.
func TestHintsOnTokenMutations(t *testing.T) {
	rng := rand.New(rand.NewPCG(59, 3))
	seeds := []string{
		`{"type":"message","id":"a","message":{"role":"custom","display":false,"content":"x"}}`,
		`{"type":"message","id":"a","message":{"role":"user","content":[{"type":"text","text":"x"},{"type":"toolCall","id":"c","name":"n","arguments":{"a":[1]}}]}}`,
		`{"type":"message","id":"a","parentId":"b","message":{"role":"toolResult","toolCallId":"c","content":[null]},"timestamp":"t"}`,
		`{"type":"compaction","id":"a","summary":"s"}`,
		`{"type":"custom_message","id":"a","display":true,"content":"x"}`,
		`{"type":"label","id":"a","label":"x"}`,
	}
	tokens := []string{`"role"`, `"Role"`, `"custom"`, `"user"`, `"content"`, `"CONTENT"`, `"message"`, `"Message"`, `"meſſage"`,
		`"display"`, `true`, `false`, `null`, `,`, `:`, `{`, `}`, `[`, `]`, `"`, `\u0063`, `"type"`, `"message"`, `"custom_message"`,
		`"compaction"`, `"summary"`, `1`, `"x"`, `[]`, `{}`, `"isError"`, `"ſ"`, "\xff", `"K"`, ` `, `"content":[1,2]`, `"role":"custom"`}
	hinted := 0
	for range 60000 {
		b := []byte(seeds[rng.IntN(len(seeds))])
		for range 1 + rng.IntN(3) {
			i := rng.IntN(len(b) + 1)
			tok := tokens[rng.IntN(len(tokens))]
			switch rng.IntN(3) {
			case 0:
				b = append(b[:i:i], append([]byte(tok), b[i:]...)...)
			case 1:
				j := min(len(b), i+rng.IntN(8))
				b = append(b[:i:i], b[j:]...)
			default:
				j := min(len(b), i+rng.IntN(8))
				b = append(b[:i:i], append([]byte(tok), b[j:]...)...)
			}
		}
		if lightAgrees(t, b) {
			if env, _ := light(b, ""); env.hint != hintUnknown {
				hinted++
			}
		}
	}
	if hinted == 0 {
		t.Fatal("no mutated line was hinted: the test checks nothing")
	}
}
