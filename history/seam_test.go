package history

import (
	"slices"
	"testing"

	"github.com/mosaic-agents/mosaic/protocol"
)

// TestSeam: the engine seam's History over a Pi session: each branch by
// its leaf, the default leaf the one Pi continues, messages root first
// with their parents and blocks, entries that are not messages left out,
// an unknown leaf unknown-branch, a new session empty.
func TestSeam(t *testing.T) {
	f := newFixture(t)
	h := f.mustRead(t).Seam(f.path)
	if !h.New() || h.DefaultLeaf() != "" || len(h.Leaves()) != 0 {
		t.Fatalf("new session: new %v, leaf %q, leaves %v", h.New(), h.DefaultLeaf(), h.Leaves())
	}
	if ms, err := h.Messages(""); err != nil || len(ms) != 0 {
		t.Fatalf("new session messages: %v, %v", ms, err)
	}

	f.write(t, hdr+msg(t, "a", "", "user", "hi")+
		ent(t, "model_change", "m", "a", map[string]any{"provider": "p", "modelId": "x"})+
		msg(t, "b", "m", "assistant", "one")+
		msg(t, "c", "m", "assistant", "two"))
	h = f.mustRead(t).Seam(f.path)
	if h.New() || h.SessionKey() != f.path || h.DefaultLeaf() != "c" {
		t.Fatalf("new %v, key %q, default leaf %q", h.New(), h.SessionKey(), h.DefaultLeaf())
	}
	leaves := h.Leaves()
	slices.Sort(leaves)
	if !slices.Equal(leaves, []string{"b", "c"}) {
		t.Fatalf("leaves %v", leaves)
	}
	type row struct{ id, parent, role, text string }
	rows := func(leaf string) []row {
		t.Helper()
		ms, err := h.Messages(leaf)
		if err != nil {
			t.Fatalf("Messages(%q): %v", leaf, err)
		}
		var out []row
		for _, m := range ms {
			if len(m.Blocks) != 1 {
				t.Fatalf("message %s has %d blocks", m.ID, len(m.Blocks))
			}
			out = append(out, row{m.ID, m.Parent, m.Role, m.Blocks[0].Text})
		}
		return out
	}
	if got, want := rows(""), []row{{"a", "", "user", "hi"}, {"c", "m", "assistant", "two"}}; !slices.Equal(got, want) {
		t.Fatalf("default branch %v, want %v", got, want)
	}
	if got, want := rows("b"), []row{{"a", "", "user", "hi"}, {"b", "m", "assistant", "one"}}; !slices.Equal(got, want) {
		t.Fatalf("branch b %v, want %v", got, want)
	}
	if _, err := h.Messages("a"); protocol.CodeOf(err) != protocol.CodeUnknownBranch {
		t.Fatalf("Messages of a non-leaf: %v, want unknown-branch", err)
	}
}
