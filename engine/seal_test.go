package engine

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func sealed(extra ...string) []string {
	return append([]string{"--mode", "rpc", "--no-extensions", "--no-prompt-templates", "--no-themes", "--no-skills", "--no-context-files", "--session", "/abs/s.jsonl"}, extra...)
}

func TestCheckArgs(t *testing.T) {
	without := func(flag string) []string {
		return slices.DeleteFunc(sealed(), func(s string) bool { return s == flag })
	}
	tests := []struct {
		name string
		args []string
		ok   bool
	}{
		{"seal", sealed(), true},
		{"options", sealed("--provider", "fakellm", "--model", "fake-model", "--thinking", "off"), true},
		{"reordered", append([]string{"--model", "m"}, sealed()...), true},
		{"extension", sealed("-e", "x.ts"), false},
		{"long extension", sealed("--extension", "x.ts"), false},
		{"second mode", sealed("--mode", "json"), false},
		{"second session", sealed("--session", "/other"), false},
		{"second model", sealed("--model", "a", "--model", "b"), false},
		{"dash value", sealed("--model", "-x"), false},
		{"at value", sealed("--provider", "@file"), false},
		{"empty value", sealed("--thinking", ""), false},
		{"equals form", sealed("--model=m"), false},
		{"bare word", sealed("hello"), false},
		{"no-session", sealed("--no-session"), false},
		{"continue", sealed("--continue"), false},
		{"print", sealed("--print"), false},
		{"mode json", []string{"--mode", "json", "--no-extensions", "--no-prompt-templates", "--no-themes", "--no-skills", "--no-context-files", "--session", "/abs/s"}, false},
		{"relative session", []string{"--mode", "rpc", "--no-extensions", "--no-prompt-templates", "--no-themes", "--no-skills", "--no-context-files", "--session", "s.jsonl"}, false},
		{"unclean session", []string{"--mode", "rpc", "--no-extensions", "--no-prompt-templates", "--no-themes", "--no-skills", "--no-context-files", "--session", "/a/../b"}, false},
		{"missing value", sealed("--model"), false},
		{"missing no-skills", without("--no-skills"), false},
		{"missing no-context-files", without("--no-context-files"), false},
		{"missing no-extensions", without("--no-extensions"), false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := CheckArgs(tc.args)
			if tc.ok && err != nil {
				t.Fatalf("refused: %v", err)
			}
			if !tc.ok && code(err) != "unsealed-engine" {
				t.Fatalf("got %v, want unsealed-engine", err)
			}
		})
	}
}

func TestSealArgs(t *testing.T) {
	args, err := Seal{Session: "/abs/s.jsonl", Model: "m"}.Args()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(args, sealed("--model", "m")) {
		t.Fatalf("args %q", args)
	}
	if _, err := (Seal{Session: "/abs/s", Model: "--evil"}).Args(); code(err) != "unsealed-engine" {
		t.Fatalf("got %v", err)
	}
}

// fakePackage lays out a package like the npm one: package.json with the
// pi bin, dist/bundle/cli.js, and node_modules/.bin/pi as a symlink.
func fakePackage(t *testing.T, version string) (bin string, dir string) {
	t.Helper()
	root := t.TempDir()
	dir = filepath.Join(root, "node_modules", "@earendil-works", "pi-coding-agent")
	must(t, os.MkdirAll(filepath.Join(dir, "dist", "bundle"), 0o755))
	must(t, os.WriteFile(filepath.Join(dir, "package.json"), []byte(`{"name":"@earendil-works/pi-coding-agent","version":"`+version+`","bin":{"pi":"dist/bundle/cli.js"}}`), 0o644))
	must(t, os.WriteFile(filepath.Join(dir, "dist", "bundle", "cli.js"), []byte("#!/usr/bin/env node\nmain()\n"), 0o755))
	must(t, os.MkdirAll(filepath.Join(root, "node_modules", ".bin"), 0o755))
	bin = filepath.Join(root, "node_modules", ".bin", "pi")
	must(t, os.Symlink("../@earendil-works/pi-coding-agent/dist/bundle/cli.js", bin))
	return bin, dir
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func TestResolveAndCheck(t *testing.T) {
	bin, dir := fakePackage(t, PinnedVersion)
	pin, err := Resolve(bin)
	if err != nil {
		t.Fatal(err)
	}
	entry := filepath.Join(dir, "dist", "bundle", "cli.js")
	if pin.Version != PinnedVersion || pin.Entry != entry || len(pin.SHA256) != 64 || pin.PackageDir != dir {
		t.Fatalf("pin %+v", pin)
	}
	if again, err := Resolve(entry); err != nil || again != pin {
		t.Fatalf("resolving the entry itself: %+v %v", again, err)
	}
	if err := Check(pin); err != nil {
		t.Fatalf("check unchanged: %v", err)
	}

	t.Run("entry changed", func(t *testing.T) {
		must(t, os.WriteFile(entry, []byte("#!/usr/bin/env node\nevil()\n"), 0o755))
		t.Cleanup(func() { must(t, os.WriteFile(entry, []byte("#!/usr/bin/env node\nmain()\n"), 0o755)) })
		if err := Check(pin); code(err) != "engine-pin-mismatch" {
			t.Fatalf("got %v", err)
		}
	})
	t.Run("version changed", func(t *testing.T) {
		pj := filepath.Join(dir, "package.json")
		old, _ := os.ReadFile(pj)
		must(t, os.WriteFile(pj, []byte(strings.Replace(string(old), PinnedVersion, "0.85.2", 1)), 0o644))
		t.Cleanup(func() { must(t, os.WriteFile(pj, old, 0o644)) })
		if err := Check(pin); code(err) != "engine-pin-mismatch" {
			t.Fatalf("got %v", err)
		}
	})
	t.Run("other version refused at add", func(t *testing.T) {
		other, _ := fakePackage(t, "0.86.0")
		if _, err := Resolve(other); code(err) != "engine-pin-mismatch" {
			t.Fatalf("got %v", err)
		}
	})
	t.Run("not the pi entry", func(t *testing.T) {
		stray := filepath.Join(dir, "dist", "stray.js")
		must(t, os.WriteFile(stray, []byte("x"), 0o644))
		if _, err := Resolve(stray); code(err) != "engine-pin-mismatch" {
			t.Fatalf("got %v", err)
		}
	})
	t.Run("no package", func(t *testing.T) {
		lone := filepath.Join(t.TempDir(), "pi")
		must(t, os.WriteFile(lone, []byte("x"), 0o755))
		if _, err := Resolve(lone); code(err) != "engine-pin-mismatch" {
			t.Fatalf("got %v", err)
		}
	})
}

func TestCommandSpec(t *testing.T) {
	bin, _ := fakePackage(t, PinnedVersion)
	pin, err := Resolve(bin)
	must(t, err)
	environ := []string{"PATH=/usr/bin", "HOME=/home/u", "LANG=C.UTF-8", "XDG_RUNTIME_DIR=/run/user/1", "ANTHROPIC_API_KEY=secret", "NODE_OPTIONS=--require evil", "PI_CODING_AGENT_DIR=/inherited", "TERM=xterm"}
	spec, err := Command(Config{Pin: pin, Seal: Seal{Session: "/p/s.jsonl", Provider: "fakellm"}, AgentDir: "/agent", ProjectRoot: "/p"}, environ)
	must(t, err)
	wantEnv := []string{"PATH=/usr/bin", "HOME=/home/u", "LANG=C.UTF-8", "XDG_RUNTIME_DIR=/run/user/1", "PI_OFFLINE=1", "PI_SKIP_VERSION_CHECK=1", "PI_TELEMETRY=0", "PI_CODING_AGENT_DIR=/agent"}
	if !slices.Equal(spec.Env, wantEnv) {
		t.Fatalf("env %q", spec.Env)
	}
	if spec.Path != pin.Entry || spec.Dir != "/p" || spec.Args[0] != pin.Entry || CheckArgs(spec.Args[1:]) != nil {
		t.Fatalf("spec %+v", spec)
	}
	if _, err := Command(Config{Pin: pin, Seal: Seal{Session: "rel"}, ProjectRoot: "/p"}, nil); code(err) != "unsealed-engine" {
		t.Fatalf("relative session: %v", err)
	}
	pin.SHA256 = strings.Repeat("0", 64)
	if _, err := Command(Config{Pin: pin, Seal: Seal{Session: "/p/s"}, ProjectRoot: "/p"}, nil); code(err) != "engine-pin-mismatch" {
		t.Fatalf("bad pin: %v", err)
	}
}

// TestResolveWrapper: the contrib/pi/install.sh wrapper resolves to the
// entry it names, and the spec runs that entry with the node it names.
func TestResolveWrapper(t *testing.T) {
	_, dir := fakePackage(t, PinnedVersion)
	entry := filepath.Join(dir, "dist", "bundle", "cli.js")
	wrapper := filepath.Join(t.TempDir(), "pi")
	must(t, os.WriteFile(wrapper, []byte("#!/bin/sh\n# pi-entry: "+entry+"\n# pi-node: /opt/node/bin/node\nexec /opt/node/bin/node "+entry+" \"$@\"\n"), 0o755))
	pin, err := Resolve(wrapper)
	if err != nil {
		t.Fatal(err)
	}
	if pin.Entry != entry || pin.Node != "/opt/node/bin/node" {
		t.Fatalf("pin %+v", pin)
	}
	spec, err := Command(Config{Pin: pin, Seal: Seal{Session: "/p/s"}, ProjectRoot: "/p"}, nil)
	must(t, err)
	if spec.Path != pin.Node || spec.Args[0] != pin.Node || spec.Args[1] != entry || CheckArgs(spec.Args[2:]) != nil {
		t.Fatalf("spec %+v", spec)
	}
}
