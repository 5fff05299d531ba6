package conversations

import (
	"path/filepath"
	"testing"
)

// TestOnSeat: another conversation on the same seat, project and
// workspace is found; the conversation itself (a --replace), another
// seat, project or workspace are not.
func TestOnSeat(t *testing.T) {
	a := fixture(t)
	s := &Store{Dir: filepath.Join(t.TempDir(), "conversations")}
	if err := s.Save(a); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		mutate func(c *Conversation)
		want   string // the id found, "" for none
	}{
		{"itself, replaced", func(c *Conversation) {}, ""},
		{"another session on the seat", func(c *Conversation) { c.ID = ID(c.Project, c.Seat, "y.jsonl") }, a.ID},
		{"another seat", func(c *Conversation) { c.Seat, c.ID = "bob", ID(c.Project, "bob", "y.jsonl") }, ""},
		{"another project", func(c *Conversation) { c.Project, c.ID = c.Project+"2", ID(c.Project+"2", c.Seat, "y.jsonl") }, ""},
		{"another workspace", func(c *Conversation) { c.Workspace, c.ID = "ws2", ID(c.Project, c.Seat, "y.jsonl") }, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := *a
			tc.mutate(&c)
			others, err := s.OnSeat(&c)
			if err != nil {
				t.Fatal(err)
			}
			got := ""
			if len(others) > 0 {
				got = others[0].ID
			}
			if len(others) > 1 || got != tc.want {
				t.Fatalf("OnSeat found %d (%q), want %q", len(others), got, tc.want)
			}
		})
	}
}
