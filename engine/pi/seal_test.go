package pi

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
		{"long extension absolute", sealed("--extension", "/abs/x.ts"), false},
		{"pinned extension", sealed("-e", "/abs/x.ts"), true},
		{"two pinned extensions", sealed("-e", "/abs/x.ts", "-e", "/abs/y.ts"), true},
		{"npm extension", sealed("-e", "npm:evil"), false},
		{"git extension", sealed("-e", "git:github.com/x/y"), false},
		{"unclean extension", sealed("-e", "/abs/../x.ts"), false},
		{"extension without value", sealed("-e"), false},
		{"extension eats a flag", sealed("-e", "--no-skills"), false},
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
	t.Setenv("XDG_STATE_HOME", t.TempDir()) // the pin's manifest cache
	t.Setenv("HOME", t.TempDir())           // Node's global folders
	root := t.TempDir()
	dir = filepath.Join(root, "node_modules", "@earendil-works", "pi-coding-agent")
	must(t, os.MkdirAll(filepath.Join(dir, "dist", "bundle", "chunks"), 0o755))
	must(t, os.WriteFile(filepath.Join(dir, "package.json"), []byte(`{"name":"@earendil-works/pi-coding-agent","version":"`+version+`","bin":{"pi":"dist/bundle/cli.js"},"engines":{"node":">=22.19.0"},"dependencies":{"dep-a":"1.0.0"},"optionalDependencies":{"not-installed":"1"}}`), 0o644))
	must(t, os.WriteFile(filepath.Join(dir, "dist", "bundle", "cli.js"), []byte("#!/usr/bin/env node\nmain()\n"), 0o755))
	must(t, os.WriteFile(filepath.Join(dir, "dist", "bundle", "chunks", "chunk-A.js"), []byte("export const a = 1\n"), 0o644))
	// A hoisted dependency, as npm installs it, with one of its own.
	dep := filepath.Join(root, "node_modules", "dep-a")
	must(t, os.MkdirAll(dep, 0o755))
	must(t, os.WriteFile(filepath.Join(dep, "package.json"), []byte(`{"name":"dep-a","version":"1.0.0","dependencies":{"dep-b":"1"}}`), 0o644))
	must(t, os.WriteFile(filepath.Join(dep, "index.js"), []byte("module.exports = 1\n"), 0o644))
	depB := filepath.Join(root, "node_modules", "dep-b")
	must(t, os.MkdirAll(depB, 0o755))
	must(t, os.WriteFile(filepath.Join(depB, "package.json"), []byte(`{"name":"dep-b","version":"1.0.0"}`), 0o644))
	must(t, os.WriteFile(filepath.Join(depB, "index.js"), []byte("module.exports = 2\n"), 0o644))
	// Installed next to Pi but not a dependency of it: not pinned.
	must(t, os.MkdirAll(filepath.Join(root, "node_modules", "unrelated"), 0o755))
	must(t, os.WriteFile(filepath.Join(root, "node_modules", "unrelated", "package.json"), []byte(`{"name":"unrelated"}`), 0o644))
	must(t, os.MkdirAll(filepath.Join(root, "node_modules", ".bin"), 0o755))
	bin = filepath.Join(root, "node_modules", ".bin", "pi")
	must(t, os.Symlink("../@earendil-works/pi-coding-agent/dist/bundle/cli.js", bin))
	return bin, dir
}

// fakeNode writes an executable "node" into a new directory that prints
// vVERSION for --version and, run on anything else, dies as an old Node
// dies on Pi's first line. It returns the directory.
func fakeNode(t *testing.T, version string) string {
	t.Helper()
	d := t.TempDir()
	script := "#!/bin/sh\nif [ \"$1\" = --version ]; then echo v" + version + "; exit 0; fi\n" +
		"echo \"fake node " + version + ": SyntaxError: Invalid regular expression flags\" >&2\nexit 1\n"
	must(t, os.WriteFile(filepath.Join(d, "node"), []byte(script), 0o755))
	return d
}

// resolve pins path as conv add does for a user whose PATH has a Node 22.
func resolve(t *testing.T, path string) (Pin, error) {
	t.Helper()
	return Resolve(path, ResolveOptions{PATH: fakeNode(t, "22.23.3") + ":/usr/bin:/bin"})
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func TestResolveAndCheck(t *testing.T) {
	bin, dir := fakePackage(t, PinnedVersion)
	path := fakeNode(t, "22.23.3")
	pin, err := Resolve(bin, ResolveOptions{PATH: path})
	if err != nil {
		t.Fatal(err)
	}
	entry := filepath.Join(dir, "dist", "bundle", "cli.js")
	if pin.Version != PinnedVersion || pin.Entry != entry || len(pin.SHA256) != 64 || pin.PackageDir != dir ||
		len(pin.PackageDigest) != 64 || pin.Node != filepath.Join(path, "node") || pin.NodeVersion != "22.23.3" || len(pin.NodeSHA256) != 64 {
		t.Fatalf("pin %+v", pin)
	}
	if again, err := Resolve(entry, ResolveOptions{PATH: path}); err != nil || again != pin {
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
		if _, err := resolve(t, other); code(err) != "engine-pin-mismatch" {
			t.Fatalf("got %v", err)
		}
	})
	t.Run("not the pi entry", func(t *testing.T) {
		stray := filepath.Join(dir, "dist", "stray.js")
		must(t, os.WriteFile(stray, []byte("x"), 0o644))
		if _, err := resolve(t, stray); code(err) != "engine-pin-mismatch" {
			t.Fatalf("got %v", err)
		}
	})
	// A path outside any package is no Pi at all: TestResolveNotPi.
}

func TestCommandSpec(t *testing.T) {
	bin, _ := fakePackage(t, PinnedVersion)
	pin, err := resolve(t, bin)
	must(t, err)
	environ := []string{"PATH=/usr/bin", "HOME=/home/u", "LANG=C.UTF-8", "XDG_RUNTIME_DIR=/run/user/1", "ANTHROPIC_API_KEY=secret", "NODE_OPTIONS=--require evil", "PI_CODING_AGENT_DIR=/inherited", "TERM=xterm"}
	spec, err := Command(Config{Pin: pin, Seal: Seal{Session: "/p/s.jsonl", Provider: "fakellm"}, AgentDir: "/agent", ProjectRoot: "/p"}, environ)
	must(t, err)
	wantEnv := []string{"PATH=/usr/bin", "HOME=/home/u", "LANG=C.UTF-8", "XDG_RUNTIME_DIR=/run/user/1", "PI_OFFLINE=1", "PI_SKIP_VERSION_CHECK=1", "PI_TELEMETRY=0", "PI_CODING_AGENT_DIR=/proc/self/fd/3"}
	if !slices.Equal(spec.Env, wantEnv) {
		t.Fatalf("env %q", spec.Env)
	}
	// The agent directory is handed, never named by its path (a tool
	// reaching it would plant "!CMD" credentials Pi runs itself).
	if !slices.Equal(spec.Dirs, []string{"/agent"}) {
		t.Fatalf("dirs %q", spec.Dirs)
	}
	if spec.Path != pin.Node || spec.Dir != "/p" || spec.Args[0] != pin.Node || spec.Args[1] != pin.Entry || CheckArgs(spec.Args[2:]) != nil {
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
	node := filepath.Join(fakeNode(t, "22.23.3"), "node")
	must(t, os.WriteFile(wrapper, []byte("#!/bin/sh\n# pi-entry: "+entry+"\n# pi-node: "+node+"\nexec "+node+" "+entry+" \"$@\"\n"), 0o755))
	// The wrapper's node wins over an older one first on the user's PATH.
	pin, err := Resolve(wrapper, ResolveOptions{PATH: fakeNode(t, "20.11.1")})
	if err != nil {
		t.Fatal(err)
	}
	if pin.Entry != entry || pin.Node != node {
		t.Fatalf("pin %+v", pin)
	}
	spec, err := Command(Config{Pin: pin, Seal: Seal{Session: "/p/s"}, ProjectRoot: "/p"}, nil)
	must(t, err)
	if spec.Path != pin.Node || spec.Args[0] != pin.Node || spec.Args[1] != entry || CheckArgs(spec.Args[2:]) != nil {
		t.Fatalf("spec %+v", spec)
	}
}
