package pi

import (
	"bufio"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mosaic-agents/mosaic/contrib/stubmodel"
)

// TestInterpreterPinAtAdd: conv add resolves node as the user's shell
// would (the entry's "#!/usr/bin/env node" on the user's PATH), or as a
// wrapper or --node names it, and refuses one older than Pi's
// engines.node or none at all, naming the fix.
func TestInterpreterPinAtAdd(t *testing.T) {
	bin, _ := fakePackage(t, PinnedVersion)
	node22, node20 := fakeNode(t, "22.23.3"), fakeNode(t, "20.11.1")
	tests := []struct {
		name     string
		opts     ResolveOptions
		wantNode string // "" for a refusal
		wantMsg  string
	}{
		{"node 22 first on the user's PATH", ResolveOptions{PATH: node22 + ":" + node20}, filepath.Join(node22, "node"), ""},
		{"node 20 first on the user's PATH", ResolveOptions{PATH: node20 + ":" + node22}, "", "Pi needs node >=22.19.0"},
		{"--node names node 22 past an old PATH", ResolveOptions{PATH: node20, Node: filepath.Join(node22, "node")}, filepath.Join(node22, "node"), ""},
		{"--node names an old node", ResolveOptions{PATH: node22, Node: filepath.Join(node20, "node")}, "", "is Node 20.11.1"},
		{"no node on PATH", ResolveOptions{PATH: t.TempDir()}, "", "--node PATH"},
		{"--node missing", ResolveOptions{PATH: node22, Node: "/nonexistent/node"}, "", "--node PATH"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pin, err := Resolve(bin, tt.opts)
			if tt.wantNode == "" {
				if code(err) != "engine-pin-mismatch" || !strings.Contains(err.Error(), tt.wantMsg) {
					t.Fatalf("got %+v, %v; want engine-pin-mismatch naming %q", pin, err, tt.wantMsg)
				}
				return
			}
			if err != nil || pin.Node != tt.wantNode || pin.NodeVersion != "22.23.3" || len(pin.NodeSHA256) != 64 {
				t.Fatalf("got %+v, %v; want node %s", pin, err, tt.wantNode)
			}
		})
	}
}

// TestInterpreterCheckedBeforeSpawn: Check refuses a pinned interpreter
// that changed, went missing or is recorded older than Pi needs, and a
// pin without an interpreter (a conversation added before it was pinned).
func TestInterpreterCheckedBeforeSpawn(t *testing.T) {
	bin, _ := fakePackage(t, PinnedVersion)
	pin, err := resolve(t, bin)
	must(t, err)
	must(t, Check(pin))
	tests := []struct {
		name   string
		mutate func(t *testing.T, p *Pin)
		want   string
	}{
		{"replaced by an old node", func(t *testing.T, p *Pin) {
			old, _ := os.ReadFile(filepath.Join(fakeNode(t, "20.11.1"), "node"))
			must(t, os.WriteFile(p.Node, old, 0o755))
		}, "changed"},
		{"removed", func(t *testing.T, p *Pin) { must(t, os.Remove(p.Node)) }, "is gone"},
		{"recorded too old", func(t *testing.T, p *Pin) { p.NodeVersion = "22.18.0" }, "Pi needs node >=22.19.0"},
		{"not pinned", func(t *testing.T, p *Pin) { p.Node, p.NodeVersion, p.NodeSHA256 = "", "", "" }, "pins no interpreter"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := resolve(t, bin)
			must(t, err)
			must(t, Check(p)) // and caches the manifest
			tt.mutate(t, &p)
			if err := Check(p); code(err) != "engine-pin-mismatch" || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("got %v; want engine-pin-mismatch naming %q", err, tt.want)
			}
			if _, err := Command(Config{Pin: p, Seal: Seal{Session: "/p/s.jsonl"}, ProjectRoot: "/p"}, nil); code(err) != "engine-pin-mismatch" {
				t.Fatalf("Command built a spec for a refused pin: %v", err)
			}
		})
	}
}

// TestPackageDigest: a chunk changed next to the unchanged entry, a file
// added, or a file of a dependency changed is refused before spawn,
// with or without the manifest cache; a touch without a change, and a
// package installed alongside that Pi does not depend on, are not.
func TestPackageDigest(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(t *testing.T, dir string)
		want   string // "" for accepted
	}{
		{"changed chunk", func(t *testing.T, dir string) {
			must(t, os.WriteFile(filepath.Join(dir, "dist", "bundle", "chunks", "chunk-A.js"), []byte("export const a = 2\n"), 0o644))
		}, "chunk-A.js"},
		{"same-size rewrite with the old mtime", func(t *testing.T, dir string) {
			p := filepath.Join(dir, "dist", "bundle", "chunks", "chunk-A.js")
			fi, _ := os.Stat(p)
			must(t, os.WriteFile(p, []byte("export const b = 1\n"), 0o644))
			must(t, os.Chtimes(p, fi.ModTime(), fi.ModTime()))
		}, "chunk-A.js"},
		{"added chunk", func(t *testing.T, dir string) {
			must(t, os.WriteFile(filepath.Join(dir, "dist", "bundle", "chunks", "chunk-B.js"), []byte("x\n"), 0o644))
		}, "added"},
		{"removed chunk", func(t *testing.T, dir string) {
			must(t, os.Remove(filepath.Join(dir, "dist", "bundle", "chunks", "chunk-A.js")))
		}, "removed"},
		{"dependency of a dependency changed", func(t *testing.T, dir string) {
			must(t, os.WriteFile(filepath.Join(dir, "..", "..", "dep-b", "index.js"), []byte("module.exports = 3\n"), 0o644))
		}, "dep-b"},
		{"dependency shadowed by a nested install", func(t *testing.T, dir string) {
			nested := filepath.Join(dir, "node_modules", "dep-a")
			must(t, os.MkdirAll(nested, 0o755))
			must(t, os.WriteFile(filepath.Join(nested, "package.json"), []byte(`{"name":"dep-a"}`), 0o644))
		}, "added"},
		{"optional dependency planted in ~/.node_modules", func(t *testing.T, dir string) {
			planted := filepath.Join(os.Getenv("HOME"), ".node_modules", "not-installed")
			must(t, os.MkdirAll(planted, 0o755))
			must(t, os.WriteFile(filepath.Join(planted, "package.json"), []byte(`{"name":"not-installed","main":"evil.js"}`), 0o644))
		}, "added"},
		{"chunk swapped for a symlink to the same bytes elsewhere", func(t *testing.T, dir string) {
			chunk := filepath.Join(dir, "dist", "bundle", "chunks", "chunk-A.js")
			elsewhere := filepath.Join(t.TempDir(), "chunk-A.js")
			must(t, os.WriteFile(elsewhere, []byte("export const a = 1\n"), 0o644))
			must(t, os.Remove(chunk))
			must(t, os.Symlink(elsewhere, chunk))
		}, "chunk-A.js"},
		{"touched, unchanged", func(t *testing.T, dir string) {
			now := time.Now().Add(time.Hour)
			must(t, os.Chtimes(filepath.Join(dir, "dist", "bundle", "chunks", "chunk-A.js"), now, now))
		}, ""},
		{"unrelated package changed", func(t *testing.T, dir string) {
			must(t, os.WriteFile(filepath.Join(dir, "..", "..", "unrelated", "index.js"), []byte("x"), 0o644))
		}, ""},
	}
	for _, cache := range []bool{true, false} {
		for _, tt := range tests {
			t.Run(tt.name+map[bool]string{true: "", false: ", no manifest cache"}[cache], func(t *testing.T) {
				bin, dir := fakePackage(t, PinnedVersion)
				pin, err := resolve(t, bin)
				must(t, err)
				must(t, Check(pin))
				tt.mutate(t, dir)
				if !cache {
					must(t, os.RemoveAll(filepath.Join(os.Getenv("XDG_STATE_HOME"), "mosaic", "pins")))
				}
				err = Check(pin)
				if tt.want == "" {
					if err != nil {
						t.Fatalf("refused: %v", err)
					}
					return
				}
				if code(err) != "engine-pin-mismatch" {
					t.Fatalf("got %v; want engine-pin-mismatch", err)
				}
				if cache && !strings.Contains(err.Error(), tt.want) {
					t.Fatalf("refusal %q does not name %q", err, tt.want)
				}
			})
		}
	}
}

// TestEngineStartsWithOldNodeFirstOnPATH is the ordinary npm install:
// the real pinned Pi's entry (#!/usr/bin/env node) pinned by a user
// whose PATH has Node 22 first, then run where the user manager's PATH
// has a Node 20 first. The engine runs on the pinned Node and answers;
// before, it ran the entry through env, found Node 20 and died on its
// first line.
func TestEngineStartsWithOldNodeFirstOnPATH(t *testing.T) {
	realPiNote(t)
	wrapper := os.Getenv("MOSAIC_PI")
	if wrapper == "" {
		t.Skip("MOSAIC_PI is unset")
	}
	node22, entry, err := readWrapper(wrapper)
	must(t, err)
	t.Setenv("XDG_STATE_HOME", t.TempDir())
	userBin := t.TempDir() // the user's ~/.local/bin with their Node 22
	must(t, os.Symlink(node22, filepath.Join(userBin, "node")))
	old := fakeNode(t, "20.11.1")

	pin, err := Resolve(entry, ResolveOptions{PATH: userBin + ":" + old})
	must(t, err)
	if pin.Node != node22 {
		t.Fatalf("pinned node %s, want the user's %s", pin.Node, node22)
	}

	dir := t.TempDir()
	session := filepath.Join(dir, "sessions", "s1.jsonl")
	must(t, os.MkdirAll(filepath.Dir(session), 0o755))
	home := filepath.Join(dir, "home")
	must(t, os.MkdirAll(home, 0o755))
	model, err := stubmodel.WriteAgentDir(filepath.Join(dir, "agent"), "http://127.0.0.1:9/v1")
	must(t, err)
	managerEnv := []string{"PATH=" + old + ":/usr/local/bin:/usr/bin:/bin", "HOME=" + home}
	spec, err := Command(Config{Pin: pin, Seal: Seal{Session: session, Provider: model.Provider, Model: model.Model},
		AgentDir: filepath.Join(dir, "agent"), ProjectRoot: dir}, managerEnv)
	must(t, err)
	cmd := &exec.Cmd{Path: spec.Path, Args: spec.Args, Env: spec.Env, Dir: spec.Dir}
	cmd.ExtraFiles, err = spec.Handed()
	must(t, err)
	t.Cleanup(func() { closeFiles(cmd.ExtraFiles) })
	stdin, err := cmd.StdinPipe()
	must(t, err)
	stdout, err := cmd.StdoutPipe()
	must(t, err)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	must(t, cmd.Start())
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	if _, err := stdin.Write([]byte(`{"id":"q1","type":"get_state"}` + "\n")); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string)
	go func() {
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 1<<20), 16<<20)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	timeout := time.After(60 * time.Second)
	for {
		select {
		case l, ok := <-lines:
			if !ok {
				cmd.Wait()
				t.Fatalf("the engine exited (%v) before answering; stderr:\n%s", cmd.ProcessState, stderr.String())
			}
			var r struct {
				ID      string `json:"id"`
				Type    string `json:"type"`
				Success bool   `json:"success"`
			}
			if json.Unmarshal([]byte(l), &r) == nil && r.ID == "q1" && r.Type == "response" && r.Success {
				return
			}
		case <-timeout:
			t.Fatalf("no get_state answer; stderr:\n%s", stderr.String())
		}
	}
}

// TestResolveNotPi: a path that is no Pi install at all (an executable
// with no package above it, another package's bin) is a wrong --engine,
// refused configuration naming how to find the right one (Pi of another
// version stays engine-pin-mismatch: TestResolveAndCheck).
func TestResolveNotPi(t *testing.T) {
	lone := filepath.Join(t.TempDir(), "true")
	must(t, os.WriteFile(lone, []byte("#!/bin/sh\nexit 0\n"), 0o755))
	other := t.TempDir()
	must(t, os.WriteFile(filepath.Join(other, "package.json"), []byte(`{"name":"left-pad","version":"1.0.0","bin":{"pi":"cli.js"}}`), 0o644))
	must(t, os.WriteFile(filepath.Join(other, "cli.js"), []byte("#!/usr/bin/env node\n"), 0o755))
	for _, tc := range []struct {
		name, path, code, msg string
	}{
		{"an executable outside any package", lone, "configuration", "no package.json above it; point --engine at the pi executable of a " + PinnedPackage},
		{"another package's bin", filepath.Join(other, "cli.js"), "configuration", `is "left-pad"; point --engine at the pi executable`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := resolve(t, tc.path)
			if code(err) != tc.code || !strings.Contains(err.Error(), tc.msg) {
				t.Fatalf("Resolve(%s) = %v; want %s naming %q", tc.path, err, tc.code, tc.msg)
			}
		})
	}
}
