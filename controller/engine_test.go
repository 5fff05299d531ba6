package controller

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/mosaic-agents/mosaic/claims"
	"github.com/mosaic-agents/mosaic/conversations"
	"github.com/mosaic-agents/mosaic/engine"
	"github.com/mosaic-agents/mosaic/engine/claude"
	"github.com/mosaic-agents/mosaic/engine/pi"
	"github.com/mosaic-agents/mosaic/protocol"
)

const engineTestUUID = "0b7e6f1e-3c1a-4b2a-9d3e-5f6a7b8c9d0e"

// TestEngineOf: the controller builds the conversation's engine by kind
// from its settings, with no effect on disk (the directories a launch
// gives the engine are spec's to make), and launches through its Spec:
// the pin is checked there (a changed binary refuses
// engine-pin-mismatch), --session-id for a new Claude session and
// --resume for an adopted one; a Claude conversation without its
// [claude] table refuses configuration.
func TestEngineOf(t *testing.T) {
	root := t.TempDir()
	store, err := claims.Open(filepath.Join(root, "state", "claims"))
	if err != nil {
		t.Fatal(err)
	}
	c := New(Config{Claims: store})
	ctx := context.Background()
	project := filepath.Join(root, "project")
	bin := filepath.Join(root, "claude")
	if err := os.WriteFile(bin, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256([]byte("#!/bin/sh\n"))
	pin := hex.EncodeToString(sum[:])
	claudeConv := func(id, sha string, adopted bool) *conversations.Conversation {
		return &conversations.Conversation{ID: id, Project: project, EngineKind: engine.KindClaude,
			Claude: &conversations.Claude{Path: bin, Version: claude.PinnedVersion, SHA256: sha, Session: engineTestUUID, Adopted: adopted}}
	}
	noDirs := func(t *testing.T, id string) {
		t.Helper()
		for _, p := range []string{c.agentDirOf(&conversations.Conversation{ID: id}), filepath.Join(root, "state", "claude", id)} {
			if _, err := os.Stat(p); !errors.Is(err, os.ErrNotExist) {
				t.Fatalf("building the engine made %s (%v)", p, err)
			}
		}
	}

	t.Run("pi", func(t *testing.T) {
		cv := &conversations.Conversation{ID: "pi-1", Project: project, Session: filepath.Join(root, "s.jsonl")}
		eng, err := c.engineOf(cv)
		if err != nil {
			t.Fatal(err)
		}
		if eng.Kind() != engine.KindPi || eng.SessionKey() != cv.Session {
			t.Fatalf("kind %s, session key %s", eng.Kind(), eng.SessionKey())
		}
		noDirs(t, cv.ID)
		if _, err := c.spec(ctx, cv); protocol.CodeOf(err) != protocol.CodeConfiguration {
			t.Fatalf("spec of a Pi conversation without an engine: %v", err)
		}
		noDirs(t, cv.ID)
	})
	t.Run("claude without its table", func(t *testing.T) {
		cv := &conversations.Conversation{ID: "claude-0", Project: project, EngineKind: engine.KindClaude}
		if _, err := c.engineOf(cv); protocol.CodeOf(err) != protocol.CodeConfiguration {
			t.Fatalf("engineOf: %v", err)
		}
		if _, err := c.spec(ctx, cv); protocol.CodeOf(err) != protocol.CodeConfiguration {
			t.Fatalf("spec: %v", err)
		}
	})
	t.Run("claude", func(t *testing.T) {
		cv := claudeConv("claude-1", pin, false)
		eng, err := c.engineOf(cv)
		if err != nil {
			t.Fatal(err)
		}
		if eng.Kind() != engine.KindClaude || eng.SessionKey() != engineTestUUID {
			t.Fatalf("kind %s, session key %s", eng.Kind(), eng.SessionKey())
		}
		noDirs(t, cv.ID)
		h, err := eng.History(ctx)
		if err != nil || !h.New() {
			t.Fatalf("history of a session with no transcript: new=%v, %v", h != nil && h.New(), err)
		}
		spec, err := c.spec(ctx, cv)
		if err != nil {
			t.Fatal(err)
		}
		if spec.Path != bin || !slices.Contains(spec.Args, "--session-id") || slices.Contains(spec.Args, "--resume") {
			t.Fatalf("first launch: %v", spec.Args)
		}
		if _, err := os.Stat(filepath.Join(root, "state", "claude", cv.ID, "config")); err != nil {
			t.Fatalf("spec did not prepare the configuration directory: %v", err)
		}
		spec, err = c.spec(ctx, claudeConv("claude-2", pin, true))
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Contains(spec.Args, "--resume") || slices.Contains(spec.Args, "--session-id") {
			t.Fatalf("adopted session: %v", spec.Args)
		}
	})
	t.Run("claude pin changed", func(t *testing.T) {
		if _, err := c.spec(ctx, claudeConv("claude-3", "00"+pin[2:], false)); protocol.CodeOf(err) != protocol.CodePinMismatch {
			t.Fatalf("spec with a changed binary: %v", err)
		}
	})
}

// TestDriverAs: a capability of one engine asked of the other's Driver is
// errOtherKind, not a panic; each engine's Driver has its own.
func TestDriverAs(t *testing.T) {
	open := func(t *testing.T, eng engine.Engine) engine.Driver {
		t.Helper()
		r, w := io.Pipe()
		t.Cleanup(func() { w.Close() })
		d, err := eng.Open(r, &lockedBuffer{}, engine.Options{Execution: "e-1"})
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	cl := open(t, claude.NewEngine(claude.Config{Session: engineTestUUID}))
	p := open(t, pi.NewEngine(pi.Config{}, nil))
	if _, err := driverAs[initializer](cl, "initialize"); err != nil {
		t.Fatal(err)
	}
	if _, err := driverAs[claudeResyncer](cl, "re-attach"); err != nil {
		t.Fatal(err)
	}
	if _, err := driverAs[announcements](cl, "watch"); err != nil {
		t.Fatal(err)
	}
	if _, err := driverAs[piResyncer](p, "re-attach"); err != nil {
		t.Fatal(err)
	}
	for name, err := range map[string]error{
		"initialize of Pi":        second(driverAs[initializer](p, "initialize")),
		"Claude re-sync of Pi":    second(driverAs[claudeResyncer](p, "re-attach")),
		"announcements of Pi":     second(driverAs[announcements](p, "watch")),
		"Pi re-sync of Claude":    second(driverAs[piResyncer](cl, "re-attach")),
		"session probe of Claude": second(driverAs[sessionProbe](cl, "get_state")),
	} {
		if !errors.Is(err, errOtherKind) {
			t.Errorf("%s: %v, want errOtherKind", name, err)
		}
	}
}

func second[T any](_ T, err error) error { return err }
