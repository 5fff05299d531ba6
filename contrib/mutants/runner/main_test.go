package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestEveryMutantApplies: each mutant's find snippet occurs exactly once
// in its file on this checkout, so a refactor that moves the code a
// mutant names fails `make test` at once rather than leaving a mutant
// that tests nothing until the next `make mutants`.
func TestEveryMutantApplies(t *testing.T) {
	root, err := repoRoot()
	if err != nil {
		t.Skipf("not in a git checkout: %v", err)
	}
	mutants, err := load(filepath.Join(root, "contrib", "mutants"))
	if err != nil {
		t.Fatal(err)
	}
	if len(mutants) == 0 {
		t.Fatal("no mutants found in contrib/mutants")
	}
	names := map[string]bool{}
	for _, m := range mutants {
		t.Run(m.Name, func(t *testing.T) {
			if names[m.Name] {
				t.Fatalf("two mutants are named %q", m.Name)
			}
			names[m.Name] = true
			src, err := os.ReadFile(filepath.Join(root, m.File))
			if err != nil {
				t.Fatal(err)
			}
			if n := bytes.Count(src, []byte(m.Find)); n != 1 {
				t.Fatalf("%s: the find snippet %q occurs %d times, want exactly 1: update the mutant to the code's new place", m.File, m.Find, n)
			}
			if m.Find == m.Replace {
				t.Fatalf("find and replace are the same: the mutant changes nothing")
			}
			for _, p := range m.Packages {
				if !strings.HasPrefix(p, "./") {
					continue // a go test flag (-run PATTERN)
				}
				dir := filepath.Join(root, filepath.FromSlash(trimDots(p)))
				if _, err := os.Stat(dir); err != nil {
					t.Fatalf("package %s: %v", p, err)
				}
			}
		})
	}
}

// trimDots turns a package pattern ("./claims/...") into its directory.
func trimDots(p string) string {
	return strings.TrimSuffix(strings.TrimSuffix(p, "..."), "/")
}
