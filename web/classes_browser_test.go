package web_test

import (
	"encoding/json"
	"log"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/mosaic-agents/mosaic/contrib/sandboxtest"
	"github.com/mosaic-agents/mosaic/contrib/stubmodel"
	"github.com/mosaic-agents/mosaic/web"
)

// TestBrowserEngineClassesInert (sandbox, Chromium, the real Pi): a
// custom message's type is the engine's own string (an extension names
// it; a tool can append an entry to the session file), and the page
// shows it in the message's header. It must not also become class names
// of the transcript item, where "open" would show a finished message as
// still streaming, "marker" dress it as the page's reconcile marker and
// "approval" as a pending approval. The session the engine resumes holds
// one such message; the page shows its type as text and the item keeps
// exactly the classes of a message.
func TestBrowserEngineClassesInert(t *testing.T) {
	sandboxtest.Require(t)
	const customType = "note marker open approval role-user"
	const text = "styled by its own type"
	id, _ := convPiSession(t, "webclass", stubmodel.Script{}, func(proj, path string) {
		lines := []string{
			`{"type":"session","version":3,"id":"0196f5a0-0000-7000-8000-00000000c1a5","timestamp":"2026-12-01T00:00:00.000Z","cwd":` + q(proj) + `}`,
			`{"type":"message","id":"u0000001","parentId":null,"timestamp":"2026-12-01T00:00:01.000Z","message":{"role":"user","content":[{"type":"text","text":"hello"}]}}`,
			`{"type":"custom_message","id":"c0000001","parentId":"u0000001","timestamp":"2026-12-01T00:00:02.000Z","customType":` + q(customType) + `,"content":` + q(text) + `,"display":true}`,
		}
		if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	})
	s := startServer(t, web.Options{Log: log.New(testWriter{t}, "server: ", 0)})
	p := newPage(t, startBrowser(t), "A")
	p.login(s, id)
	p.run("open the conversation", chromedp.Navigate(s.base+"/c/"+id))
	p.until("the custom message", textHas("#transcript", text))
	type shown struct {
		Classes []string `json:"classes"`
		Head    string   `json:"head"`
	}
	v := eval[shown](p, `(() => { const li = Array.from(document.querySelectorAll("#transcript li")).find(li => li.textContent.includes(`+q(text)+`));
		return {classes: Array.from(li.classList), head: li.querySelector(".head").textContent}; })()`)
	if !strings.Contains(v.Head, customType) {
		t.Errorf("the item's header %q does not show the engine's type %q as text", v.Head, customType)
	}
	if want := []string{"item", "message", "role-custom"}; !slices.Equal(v.Classes, want) {
		t.Errorf("the item's classes are %q, want %q: the engine's type became class names", v.Classes, want)
	}
}

// q quotes s for JSON and JavaScript.
func q(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
