package pi

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/mosaic-agents/mosaic/engine"
)

// TestEngineSeam: Pi's engine.Engine is Command, Check and the session
// file: the same Spec Command builds (pin checked first), the session
// file as the key, and the history of that file only, a missing one new.
func TestEngineSeam(t *testing.T) {
	bin, _ := fakePackage(t, PinnedVersion)
	pin, err := resolve(t, bin)
	must(t, err)
	dir := t.TempDir()
	session := filepath.Join(dir, "s.jsonl")
	cfg := Config{Pin: pin, Seal: Seal{Session: session}, ProjectRoot: dir}
	environ := []string{"PATH=/usr/bin", "ANTHROPIC_API_KEY=secret"}
	var e engine.Engine = NewEngine(cfg, environ)
	ctx := context.Background()
	want, err := Command(cfg, environ)
	must(t, err)
	got, err := e.Spec(ctx, true)
	must(t, err)
	if e.Kind() != engine.KindPi || e.SessionKey() != session || got.Path != want.Path || !slices.Equal(got.Args, want.Args) || !slices.Equal(got.Env, want.Env) {
		t.Fatalf("kind %q, key %q, spec %+v, want %+v", e.Kind(), e.SessionKey(), got, want)
	}
	must(t, e.CheckPin(ctx))
	h, err := e.History(ctx)
	must(t, err)
	if !h.New() || h.SessionKey() != session {
		t.Fatalf("history of a missing file: new %v, key %q", h.New(), h.SessionKey())
	}
	must(t, os.WriteFile(session, []byte(`{"type":"session","version":3,"id":"s1","timestamp":"2026-01-01T00:00:00.000Z","cwd":"`+dir+`"}`+"\n"+
		`{"type":"message","id":"a","parentId":null,"timestamp":"2026-01-01T00:00:01.000Z","message":{"role":"user","content":"hi"}}`+"\n"), 0o600))
	h, err = e.History(ctx)
	must(t, err)
	if ms, err := h.Messages(""); err != nil || len(ms) != 1 || ms[0].ID != "a" || h.DefaultLeaf() != "a" {
		t.Fatalf("messages %+v, %v", ms, err)
	}

	pin.SHA256 = strings.Repeat("0", 64)
	e = NewEngine(Config{Pin: pin, Seal: Seal{Session: session}, ProjectRoot: dir}, environ)
	if err := e.CheckPin(ctx); code(err) != "engine-pin-mismatch" {
		t.Fatalf("CheckPin with a bad pin: %v", err)
	}
	if _, err := e.Spec(ctx, false); code(err) != "engine-pin-mismatch" {
		t.Fatalf("Spec with a bad pin: %v", err)
	}
}
