package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/mosaic-agents/mosaic/contrib/sandboxtest"
	"github.com/mosaic-agents/mosaic/history"
	"github.com/mosaic-agents/mosaic/protocol"
)

// TestClaudeObservePagesBack: a Claude conversation longer than one page
// (55 prompts through the controller's queue to the real 2.1.328: 110
// messages) is read back through observe and its cursors: the newest
// page holds history.MaxPageParts messages and a cursor, the older page
// the rest, and together they are the transcript's branch in order,
// every prompt and every reply once (no gap, no overlap).
func TestClaudeObservePagesBack(t *testing.T) {
	sandboxtest.Require(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	r := newClaudeRig(t, "cpages")
	lib := activeLib(t, ctx, r.path)
	if _, err := lib.c.Takeover(ctx); err != nil {
		t.Fatal(err)
	}
	const n = 55
	for i := range n {
		if rc, err := lib.c.Prompt(ctx, fmt.Sprintf("p%03d", i)); err != nil || rc.State == protocol.ReceiptDispatchRefused {
			t.Fatalf("prompt %d: %v %+v", i, err, rc)
		}
	}
	for lib.runs() < n {
		select {
		case <-ctx.Done():
			t.Fatalf("%d of %d turns settled", lib.runs(), n)
		case <-time.After(200 * time.Millisecond):
		}
	}
	view := dialLib(t, r.path)
	if view.cursor == "" {
		t.Fatal("the newest page of a 110-message conversation came without a cursor")
	}
	obs, err := view.c.Observe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var page history.Page
	if err := json.Unmarshal(obs.History, &page); err != nil {
		t.Fatal(err)
	}
	if len(page.Parts) != history.MaxPageParts || page.From == 0 || page.More {
		t.Fatalf("newest page: from %d, %d parts, more %v", page.From, len(page.Parts), page.More)
	}
	pages := []history.Page{page}
	for cursor := obs.Cursor; cursor != ""; {
		rec, err := view.c.OlderPage(ctx, cursor)
		if err != nil {
			t.Fatal(err)
		}
		var p history.Page
		if err := json.Unmarshal(rec.History, &p); err != nil {
			t.Fatal(err)
		}
		if next := pages[0].From; p.From+len(p.Parts) != next || !p.More {
			t.Fatalf("older page from %d with %d parts does not end where the newer one (from %d) starts", p.From, len(p.Parts), next)
		}
		pages = append([]history.Page{p}, pages...)
		cursor = rec.Cursor
	}
	if pages[0].From != 0 {
		t.Fatalf("paging back stopped at part %d", pages[0].From)
	}
	var texts []string
	for _, p := range pages {
		for _, part := range p.Parts {
			var s strings.Builder
			for _, f := range part.Blocks {
				s.WriteString(f.Content.Text)
			}
			texts = append(texts, part.Role+":"+s.String())
		}
	}
	var want []string
	for i := range n {
		want = append(want, fmt.Sprintf("user:p%03d", i), fmt.Sprintf("assistant:Hello from fake. You said: p%03d", i))
	}
	if strings.Join(texts, "\n") != strings.Join(want, "\n") {
		t.Fatalf("the pages read back:\n%s\nwant every prompt and reply once, in order", strings.Join(texts, "\n"))
	}
}
