// Command testprogress reads `go test -json` on stdin and prints progress a
// person can follow: one line per top-level test as it ends, a package's
// summary as it ends (as plain `go test` does), and the whole output of a
// failing test or package. Plain `go test` prints nothing until a package
// ends, which inside the systemd sandbox takes minutes; `go test -v` prints
// every log line of every test.
//
// It exits 1 when a test, a package or a build failed; `make test` also
// runs it under pipefail, so go test's own status counts.
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
)

// event is test2json's record (go doc cmd/test2json), with the build
// events of `go test -json`.
type event struct {
	Action     string
	Package    string
	ImportPath string
	Test       string
	Elapsed    float64
	Output     string
}

// maxKept bounds the output kept per test or package: its tail is what a
// failure needs.
const maxKept = 1 << 20

type buffer struct{ b []byte }

func (b *buffer) add(s string) {
	b.b = append(b.b, s...)
	if len(b.b) > maxKept {
		b.b = append([]byte("[... earlier output dropped ...]\n"), b.b[len(b.b)-maxKept/2:]...)
	}
}

type printer struct {
	out    io.Writer
	kept   map[string]*buffer // by package + "\x00" + top-level test ("" for the package)
	failed bool
}

func key(pkg, test string) string {
	if i := strings.IndexByte(test, '/'); i >= 0 {
		test = test[:i]
	}
	return pkg + "\x00" + test
}

func (p *printer) buf(k string) *buffer {
	b := p.kept[k]
	if b == nil {
		b = &buffer{}
		p.kept[k] = b
	}
	return b
}

func (p *printer) event(e event) {
	switch e.Action {
	case "build-output":
		fmt.Fprint(p.out, e.Output)
		return
	case "build-fail":
		p.failed = true
		return
	case "output":
		p.buf(key(e.Package, e.Test)).add(e.Output)
		return
	case "pass", "fail", "skip":
	default:
		return
	}
	k := key(e.Package, e.Test)
	switch {
	case e.Test != "" && strings.Contains(e.Test, "/"):
		return // a subtest: its output is in its top-level test's
	case e.Test != "":
		switch e.Action {
		case "pass":
			fmt.Fprintf(p.out, "    ok    %s (%.1fs)\n", e.Test, e.Elapsed)
		case "skip":
			fmt.Fprintf(p.out, "    skip  %s: %s\n", e.Test, skipReason(p.buf(k).b))
		case "fail":
			p.failed = true
			fmt.Fprintf(p.out, "--- FAIL  %s (%.1fs)\n%s", e.Test, e.Elapsed, p.buf(k).b)
		}
		delete(p.kept, k)
	default:
		out := p.buf(k).b
		delete(p.kept, k)
		switch e.Action {
		case "pass":
			if strings.Contains(string(out), "[no test files]") {
				fmt.Fprintf(p.out, "?     %s [no test files]\n", e.Package)
				return
			}
			fmt.Fprintf(p.out, "ok    %s %.1fs\n", e.Package, e.Elapsed)
		case "skip":
			fmt.Fprintf(p.out, "?     %s [no test files]\n", e.Package)
		case "fail":
			p.failed = true
			p.unfinished(e.Package)
			fmt.Fprintf(p.out, "%sFAIL  %s %.1fs\n", out, e.Package, e.Elapsed)
		}
	}
}

// unfinished prints the output of pkg's top-level tests that never
// ended: the binary died under them (its -timeout's panic, a crash), and
// test2json files that output, the goroutine dump included, under the
// tests that were running.
func (p *printer) unfinished(pkg string) {
	var names []string
	for k := range p.kept {
		if test, ok := strings.CutPrefix(k, pkg+"\x00"); ok && test != "" {
			names = append(names, test)
		}
	}
	slices.Sort(names)
	for _, test := range names {
		k := key(pkg, test)
		fmt.Fprintf(p.out, "--- UNFINISHED  %s (running when the package failed)\n%s", test, p.kept[k].b)
		delete(p.kept, k)
	}
}

// skipReason is the last log line of a skipped test: t.Skip's message.
func skipReason(out []byte) string {
	lines := strings.Split(strings.TrimRight(string(out), "\n"), "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		l := strings.TrimSpace(lines[i])
		if l != "" && !strings.HasPrefix(l, "--- SKIP") && !strings.HasPrefix(l, "=== ") {
			return l
		}
	}
	return "(no reason given)"
}

func main() {
	p := &printer{out: os.Stdout, kept: map[string]*buffer{}}
	sc := bufio.NewScanner(os.Stdin)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	for sc.Scan() {
		var e event
		if line := sc.Bytes(); len(line) == 0 || line[0] != '{' || json.Unmarshal(line, &e) != nil {
			fmt.Fprintf(p.out, "%s\n", line) // not an event: go test's own message
			continue
		}
		p.event(e)
	}
	if err := sc.Err(); err != nil {
		fmt.Fprintf(os.Stderr, "testprogress: %v\n", err)
		os.Exit(1)
	}
	if p.failed {
		os.Exit(1)
	}
}
