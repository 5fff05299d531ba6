// Command runner applies each mutant of the brief's list (the *.toml files
// in contrib/mutants) to a scratch copy of the checkout, rebuilds the
// project binaries there, runs the mutant's packages' tests, and prints one
// line per mutant: `killed <name>` when a test failed, `survived <name>`
// when none did. It exits non-zero if any mutant survived or no longer
// applies (its `find` snippet must occur exactly once), because a mutant
// that cannot be applied tests nothing.
//
// usage: go run ./contrib/mutants/runner [-only NAME] [-v]
package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/BurntSushi/toml"
)

// Mutant is one entry of the brief's mutation list.
type Mutant struct {
	Name     string   `toml:"name"`
	Brief    int      `toml:"brief"`
	File     string   `toml:"file"`
	Find     string   `toml:"find"`
	Replace  string   `toml:"replace"`
	Packages []string `toml:"packages"`
}

func main() {
	only := flag.String("only", "", "run only the mutant with this name")
	verbose := flag.Bool("v", false, "print the test output of each mutant")
	timeout := flag.Duration("timeout", 15*time.Minute, "bound on one mutant's test run")
	flag.Parse()
	root, err := repoRoot()
	if err != nil {
		fatal(err)
	}
	mutants, err := load(filepath.Join(root, "contrib", "mutants"))
	if err != nil {
		fatal(err)
	}
	bad := 0
	for _, m := range mutants {
		if *only != "" && m.Name != *only {
			continue
		}
		verdict, out := runOne(root, m, *timeout)
		fmt.Printf("%s %s (brief mutant %d)\n", verdict, m.Name, m.Brief)
		if verdict != "killed" {
			bad++
		}
		if *verbose || verdict == "stale" {
			os.Stdout.Write(out)
		}
	}
	if bad > 0 {
		fmt.Fprintf(os.Stderr, "mutants: %d not killed\n", bad)
		os.Exit(1)
	}
}

func fatal(err error) {
	fmt.Fprintf(os.Stderr, "mutants: %v\n", err)
	os.Exit(2)
}

func repoRoot() (string, error) {
	out, err := exec.Command("git", "rev-parse", "--show-toplevel").Output()
	if err != nil {
		return "", fmt.Errorf("find the checkout: %w", err)
	}
	return strings.TrimSpace(string(out)), nil
}

func load(dir string) ([]Mutant, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.toml"))
	if err != nil {
		return nil, err
	}
	sort.Strings(files)
	var out []Mutant
	for _, f := range files {
		var m Mutant
		md, err := toml.DecodeFile(f, &m)
		if err != nil {
			return nil, fmt.Errorf("mutant %s: %w", f, err)
		}
		if len(md.Undecoded()) > 0 {
			return nil, fmt.Errorf("mutant %s: unknown keys %v", f, md.Undecoded())
		}
		if m.Name == "" || m.File == "" || m.Find == "" || len(m.Packages) == 0 {
			return nil, fmt.Errorf("mutant %s: name, file, find and packages are required", f)
		}
		out = append(out, m)
	}
	return out, nil
}

// runOne returns "killed", "survived" or "stale", and the output.
func runOne(root string, m Mutant, timeout time.Duration) (string, []byte) {
	scratch, err := os.MkdirTemp("", "mosaic-mutant-")
	if err != nil {
		return "stale", []byte(err.Error() + "\n")
	}
	defer os.RemoveAll(scratch)
	// The sandbox runs each test binary as an unprivileged user in its
	// package directory: MkdirTemp's 0700 would fail that chdir (systemd's
	// 200/CHDIR), which is not a test failure.
	if err := os.Chmod(scratch, 0o755); err != nil {
		return "stale", []byte(err.Error() + "\n")
	}
	if err := copyTracked(root, scratch); err != nil {
		return "stale", []byte(err.Error() + "\n")
	}
	p := filepath.Join(scratch, m.File)
	src, err := os.ReadFile(p)
	if err != nil {
		return "stale", []byte(err.Error() + "\n")
	}
	if n := bytes.Count(src, []byte(m.Find)); n != 1 {
		return "stale", []byte(fmt.Sprintf("%s: the find snippet occurs %d times, want exactly 1\n", m.File, n))
	}
	if err := os.WriteFile(p, bytes.Replace(src, []byte(m.Find), []byte(m.Replace), 1), 0o644); err != nil {
		return "stale", []byte(err.Error() + "\n")
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	bin := filepath.Join(scratch, ".build", "bin")
	build := exec.CommandContext(ctx, "go", "build", "-o", bin+"/",
		"./cmd/mosaicctl", "./contrib/fakepi/cmd/fakepi", "./contrib/stubmodel/cmd/stubmodel")
	build.Dir = scratch
	if out, err := build.CombinedOutput(); err != nil {
		// A mutant that does not compile tests nothing.
		return "stale", append([]byte("build failed:\n"), out...)
	}
	args := append([]string{"test", "-count=1", "-exec", filepath.Join(scratch, "contrib", "sandbox", "exec")}, m.Packages...)
	test := exec.CommandContext(ctx, "go", args...)
	test.Dir = scratch
	test.Env = append(os.Environ(), "MOSAIC_BIN_DIR="+bin)
	out, err := test.CombinedOutput()
	if ctx.Err() != nil {
		return "killed", append(out, []byte("(the tests timed out: counted as killed)\n")...)
	}
	if err != nil {
		return "killed", out
	}
	return "survived", out
}

// copyTracked copies the files git tracks, as they are in the working tree.
func copyTracked(root, dst string) error {
	out, err := exec.Command("git", "-C", root, "ls-files", "-z", "--cached", "--others", "--exclude-standard").Output()
	if err != nil {
		return fmt.Errorf("list files: %w", err)
	}
	for _, rel := range strings.Split(strings.TrimRight(string(out), "\x00"), "\x00") {
		if rel == "" {
			continue
		}
		src := filepath.Join(root, rel)
		fi, err := os.Lstat(src)
		if err != nil {
			continue // deleted in the working tree
		}
		if !fi.Mode().IsRegular() {
			continue
		}
		b, err := os.ReadFile(src)
		if err != nil {
			return err
		}
		d := filepath.Join(dst, rel)
		if err := os.MkdirAll(filepath.Dir(d), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(d, b, fi.Mode().Perm()); err != nil {
			return err
		}
	}
	return nil
}
