package fixturedoc

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// tagLetters are the first letters of the brief's fixture tables (W, N, S,
// H, K, P, E, L) and of the plan's question numbers (Q).
const tagLetters = "WNSHKPELQ"

// wordTag is a tag standing as a word in prose: "K10", "(W9)", "H3/H9",
// "W1–W11". The ASCII word boundaries leave out "K8s", "E2E", "0xE7",
// "\u00E7" and "U+00E7".
var wordTag = regexp.MustCompile(`\b[` + tagLetters + `][0-9]{1,2}\b`)

// definedRow is a table row of docs/fixtures.md whose first cell is a tag.
var definedRow = regexp.MustCompile("^\\|\\s*`?([A-Z][0-9]{1,2})`?\\s*\\|")

// testRef is a test named in docs/fixtures.md: `controller.TestTakeoverRaces`,
// `cmd/mosaicctl.TestAttachInTmux` (a package directory, a dot, a function).
var testRef = regexp.MustCompile("`([a-z][a-z0-9]*(?:/[a-z][a-z0-9]*)*)\\.((?:Test|Fuzz|Benchmark)[A-Za-z0-9_]*)")

// use is one tag found in the code.
type use struct {
	tag, file string
	line      int
	where     string // comment, string, test name
}

func (u use) String() string { return fmt.Sprintf("%s:%d: %s in a %s", u.file, u.line, u.tag, u.where) }

// TestEveryTagIsDefined fails for each tag that a comment, string literal
// or test name of the module, or the text of another Markdown document,
// uses and docs/fixtures.md does not define. Adding a use of a defined tag
// anywhere needs no change here.
func TestEveryTagIsDefined(t *testing.T) {
	root := moduleRoot(t)
	defined := definedTags(t, root)
	uses := scanModule(t, root)
	if len(uses) < 100 {
		// The code holds about 250 uses; far fewer means the scan broke.
		t.Fatalf("found only %d tag uses; the scan is not reading the module", len(uses))
	}
	for _, u := range uses {
		if !defined[u.tag] {
			t.Errorf("%s: docs/fixtures.md does not define %s; add a row for it (its rule and the tests that hold it), or name a defined fixture", u, u.tag)
		}
	}
}

// TestNamedTestsExist fails for each test that docs/fixtures.md names and
// its package does not declare, so a renamed or removed test cannot leave
// the document pointing at nothing.
func TestNamedTestsExist(t *testing.T) {
	root := moduleRoot(t)
	doc := readDoc(t, root)
	decls := map[string]map[string]bool{} // package directory -> test functions
	refs := 0
	for n, line := range strings.Split(doc, "\n") {
		for _, m := range testRef.FindAllStringSubmatch(line, -1) {
			dir, fn := m[1], m[2]
			if decls[dir] == nil {
				decls[dir] = testFuncs(t, filepath.Join(root, filepath.FromSlash(dir)))
			}
			refs++
			if !decls[dir][fn] {
				t.Errorf("docs/fixtures.md:%d names %s.%s, which package %s does not declare", n+1, dir, fn, dir)
			}
		}
	}
	if refs < 50 {
		t.Fatalf("docs/fixtures.md names only %d tests; the pattern is not reading it", refs)
	}
}

// TestScanner pins what counts as a tag, so the two tests above neither
// miss a use nor fail on a look-alike.
func TestScanner(t *testing.T) {
	// Tags are assembled so that this file itself holds none.
	k10, w9, e2, s4, s5, s7 := "K"+"10", "W"+"9", "E"+"2", "S"+"4", "S"+"5", "S"+"7"
	src := "package p\n\n" +
		"// Restart resumes the stop (" + k10 + "); see " + w9 + "/" + e2 + ".\n" +
		"// Not tags: K8s, E2E, 0xE7, U+00E7, KW10, " + k10 + "x, W100.\n" +
		"func TestScreen" + s4 + s5 + s7 + "(t *testing.T) {\n" +
		"\tt.Run(\"case (" + w9 + ")\", nil)\n" +
		"\tpage := \"" + w9 + "\" // a bare tag as data is not a reference\n" +
		"\t_ = `raw\n" + e2 + " here`\n" +
		"}\n" +
		"func helper" + s4 + "() {}\n" +
		"func TestE2EFlow(t *testing.T) {}\n"
	got := scanSource(t, "p_test.go", []byte(src))
	var lines []string
	for _, u := range got {
		lines = append(lines, u.String())
	}
	want := []string{
		"p_test.go:3: " + k10 + " in a comment",
		"p_test.go:3: " + w9 + " in a comment",
		"p_test.go:3: " + e2 + " in a comment",
		"p_test.go:5: " + s4 + " in a test name",
		"p_test.go:5: " + s5 + " in a test name",
		"p_test.go:5: " + s7 + " in a test name",
		"p_test.go:6: " + w9 + " in a string",
		"p_test.go:9: " + e2 + " in a string",
	}
	if !slices.Equal(lines, want) {
		t.Fatalf("scan found\n\t%s\nwant\n\t%s", strings.Join(lines, "\n\t"), strings.Join(want, "\n\t"))
	}
	md := scanText("x.md", "K8s and E2E, then\nthe stop ("+k10+") and "+w9+".\n")
	if len(md) != 2 || md[0].String() != "x.md:2: "+k10+" in a document" || md[1].tag != w9 {
		t.Fatalf("document scan found %v", md)
	}
	rows := "| " + w9 + " | rule | tests |\n| `" + k10 + "` | rule | tests |\n| W | not a tag |\n| Id | Rule |\n"
	var def []string
	for _, l := range strings.Split(rows, "\n") {
		if m := definedRow.FindStringSubmatch(l); m != nil {
			def = append(def, m[1])
		}
	}
	if !slices.Equal(def, []string{w9, k10}) {
		t.Fatalf("defined rows %v", def)
	}
}

func moduleRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod above the test's directory")
		}
		dir = parent
	}
}

func readDoc(t *testing.T, root string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, "docs", "fixtures.md"))
	if err != nil {
		t.Fatalf("read the fixture document: %v", err)
	}
	return string(b)
}

func definedTags(t *testing.T, root string) map[string]bool {
	t.Helper()
	defined := map[string]bool{}
	for _, line := range strings.Split(readDoc(t, root), "\n") {
		if m := definedRow.FindStringSubmatch(line); m != nil {
			defined[m[1]] = true
		}
	}
	if len(defined) < 70 {
		t.Fatalf("docs/fixtures.md defines only %d tags; its tables are not being read", len(defined))
	}
	return defined
}

// scanModule reads every .go and .md file of the module the way the go
// command sees packages: directories starting with "." or "_", testdata
// and node_modules are skipped. This package and docs/fixtures.md are
// skipped too: they talk about tags rather than cite them.
func scanModule(t *testing.T, root string) []use {
	t.Helper()
	self, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	var uses []use
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if path != root && (strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") ||
				name == "testdata" || name == "node_modules" || path == self) {
				return filepath.SkipDir
			}
			return nil
		}
		rel, _ := filepath.Rel(root, path)
		rel = filepath.ToSlash(rel)
		if rel == "docs/fixtures.md" || !strings.HasSuffix(name, ".go") && !strings.HasSuffix(name, ".md") {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if strings.HasSuffix(name, ".md") {
			uses = append(uses, scanText(rel, string(src))...)
		} else {
			uses = append(uses, scanSource(t, rel, src)...)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return uses
}

// scanSource returns the tags in one file's comments, string literals and
// test function names, in source order.
func scanSource(t *testing.T, name string, src []byte) []use {
	t.Helper()
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, name, src, parser.ParseComments|parser.SkipObjectResolution)
	if err != nil {
		t.Fatalf("parse %s: %v", name, err)
	}
	var uses []use
	add := func(pos token.Pos, text, where string, skipBare bool) {
		line := fset.Position(pos).Line
		for _, ix := range wordTag.FindAllStringIndex(text, -1) {
			tag := text[ix[0]:ix[1]]
			if skipBare && strings.TrimSpace(text) == tag {
				continue
			}
			uses = append(uses, use{tag: tag, file: name, line: line + strings.Count(text[:ix[0]], "\n"), where: where})
		}
	}
	for _, cg := range f.Comments {
		for _, c := range cg.List {
			add(c.Slash, c.Text, "comment", false)
		}
	}
	ast.Inspect(f, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.FuncDecl:
			if n.Recv == nil && strings.HasSuffix(name, "_test.go") {
				for _, tag := range nameTags(n.Name.Name) {
					uses = append(uses, use{tag: tag, file: name, line: fset.Position(n.Name.Pos()).Line, where: "test name"})
				}
			}
		case *ast.BasicLit:
			if n.Kind != token.STRING {
				return true
			}
			s, err := strconv.Unquote(n.Value)
			if err != nil {
				s = n.Value
			}
			// A raw string keeps its newlines, so lines count from its start;
			// an interpreted one is on one line, and its \n escapes must not
			// move the position.
			if !strings.HasPrefix(n.Value, "`") {
				s = strings.ReplaceAll(s, "\n", " ")
			}
			add(n.Pos(), s, "string", true)
		}
		return true
	})
	slices.SortStableFunc(uses, func(a, b use) int { return a.line - b.line })
	return uses
}

// scanText returns the tags in a Markdown document, by line.
func scanText(name, text string) []use {
	var uses []use
	for i, line := range strings.Split(text, "\n") {
		for _, tag := range wordTag.FindAllString(line, -1) {
			uses = append(uses, use{tag: tag, file: name, line: i + 1, where: "document"})
		}
	}
	return uses
}

// nameTags returns the tags in a test, fuzz or benchmark function name,
// where they run into the words around them: TestScreenS4S5S7,
// TestK1ScopeStopKillsSetsidChild, TestRecordingsFrameE2. A tag there
// starts the name's rest or follows a lower-case letter or a digit, and is
// not followed by a digit. "E2E" and the like (a letter, 2, the same
// letter) are words, not tags.
func nameTags(fn string) []string {
	var rest string
	for _, p := range []string{"Test", "Fuzz", "Benchmark"} {
		if r, ok := strings.CutPrefix(fn, p); ok {
			rest = r
			break
		}
	}
	var tags []string
	for i := 0; i < len(rest); i++ {
		c := rest[i]
		if !strings.ContainsRune(tagLetters, rune(c)) {
			continue
		}
		if i > 0 && !isLowerOrDigit(rest[i-1]) {
			continue
		}
		j := i + 1
		for j < len(rest) && j-i <= 2 && isDigit(rest[j]) {
			j++
		}
		if j == i+1 || (j < len(rest) && isDigit(rest[j])) {
			continue
		}
		if rest[i+1:j] == "2" && j < len(rest) && rest[j] == c {
			continue // E2E, P2P
		}
		tags = append(tags, rest[i:j])
		i = j - 1
	}
	return tags
}

func isDigit(c byte) bool        { return '0' <= c && c <= '9' }
func isLowerOrDigit(c byte) bool { return isDigit(c) || 'a' <= c && c <= 'z' }

// testFuncs returns the test, fuzz and benchmark functions declared in the
// _test.go files of one package directory.
func testFuncs(t *testing.T, dir string) map[string]bool {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*_test.go"))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	fset := token.NewFileSet()
	for _, p := range files {
		f, err := parser.ParseFile(fset, p, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatalf("parse %s: %v", p, err)
		}
		for _, d := range f.Decls {
			if fd, ok := d.(*ast.FuncDecl); ok && fd.Recv == nil {
				out[fd.Name.Name] = true
			}
		}
	}
	return out
}
