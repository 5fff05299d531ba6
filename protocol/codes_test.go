package protocol

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// declared returns the string constants of this package's non-test files
// whose names start with prefix, by value.
func declared(t *testing.T, prefix string) map[string]string {
	t.Helper()
	fset := token.NewFileSet()
	out := map[string]string{}
	for _, name := range []string{"codes.go", "records.go", "states.go", "control.go"} {
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			g, ok := d.(*ast.GenDecl)
			if !ok || g.Tok != token.CONST {
				continue
			}
			for _, s := range g.Specs {
				vs := s.(*ast.ValueSpec)
				for i, id := range vs.Names {
					if !strings.HasPrefix(id.Name, prefix) || i >= len(vs.Values) {
						continue
					}
					lit, ok := vs.Values[i].(*ast.BasicLit)
					if !ok {
						continue
					}
					v, _ := strconv.Unquote(lit.Value)
					if other, dup := out[v]; dup {
						t.Errorf("%s and %s are one string %q under two names", other, id.Name, v)
					}
					out[v] = id.Name
				}
			}
		}
	}
	if len(out) == 0 {
		t.Fatalf("no %s constants found", prefix)
	}
	return out
}

func readDoc(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", path))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// section returns the text of doc from the heading that starts with head
// to the next heading of the same or a higher level.
func section(t *testing.T, doc, head string) string {
	t.Helper()
	i := strings.Index(doc, "\n"+head)
	if i < 0 {
		t.Fatalf("no section %q", head)
	}
	level := strings.Index(head, " ")
	rest := doc[i+1+len(head):]
	for j := 0; j < len(rest); j++ {
		if rest[j] == '\n' && strings.HasPrefix(rest[j+1:], strings.Repeat("#", level)+" ") {
			return rest[:j]
		}
	}
	return rest
}

var ticked = regexp.MustCompile("`([a-z][a-zA-Z0-9-]*)`")

func ticks(s string) []string {
	var out []string
	for _, m := range ticked.FindAllStringSubmatch(s, -1) {
		out = append(out, m[1])
	}
	return out
}

// firstColumn returns the backticked words of the first column of every
// table row in s.
func firstColumn(s string) []string {
	var out []string
	for _, line := range strings.Split(s, "\n") {
		cells := strings.Split(line, "|")
		if len(cells) < 3 || !strings.HasPrefix(line, "|") {
			continue
		}
		out = append(out, ticks(cells[1])...)
	}
	return out
}

// column returns the backticked words of column n of every table row in s.
func column(s string, n int) []string {
	var out []string
	for _, line := range strings.Split(s, "\n") {
		cells := strings.Split(line, "|")
		if len(cells) < n+2 || !strings.HasPrefix(line, "|") {
			continue
		}
		out = append(out, ticks(cells[n])...)
	}
	return out
}

// match checks that the constants and the words the doc lists are the
// same set.
func match(t *testing.T, what string, consts map[string]string, doc []string) {
	t.Helper()
	listed := map[string]bool{}
	for _, w := range doc {
		listed[w] = true
		if _, ok := consts[w]; !ok {
			t.Errorf("the docs list %s %q, which no constant declares", what, w)
		}
	}
	var missing []string
	for v, name := range consts {
		if !listed[v] {
			missing = append(missing, name+" ("+v+")")
		}
	}
	sort.Strings(missing)
	for _, m := range missing {
		t.Errorf("%s %s is not in the docs", what, m)
	}
}

// TestVocabularyMatchesDocs holds the constants of this package against
// docs/protocol.md and README.md: a code, record, notice kind, receipt or
// stop state is declared here exactly when the docs list it.
func TestVocabularyMatchesDocs(t *testing.T) {
	proto := readDoc(t, "docs/protocol.md")
	readme := readDoc(t, "README.md")

	t.Run("codes", func(t *testing.T) {
		var doc []string
		doc = append(doc, firstColumn(section(t, proto, "## 10. Refusal codes"))...)
		doc = append(doc, column(section(t, proto, "### Bounds"), 4)...)
		doc = append(doc, firstColumn(section(t, readme, "## Protocol"))...)
		match(t, "refusal code", declared(t, "Code"), doc)
	})
	t.Run("records", func(t *testing.T) {
		broadcasts := section(t, proto, "## 7. Broadcasts")
		doc := firstColumn(broadcasts[:strings.Index(broadcasts, "\n### ")])
		// "with `cursor`: `page`" names a field, then the record.
		commands := regexp.MustCompile("`[a-zA-Z]+`:").ReplaceAllString(section(t, proto, "## 6. Commands"), "")
		doc = append(doc, column(commands, 3)...)
		for _, m := range regexp.MustCompile(`"record":\s*"([a-zA-Z]+)"`).FindAllStringSubmatch(proto, -1) {
			doc = append(doc, m[1])
		}
		// The reply column also names states and codes.
		records := declared(t, "Record")
		var names []string
		for _, w := range doc {
			if _, state := declared(t, "Receipt")[w]; state {
				continue
			}
			if _, state := declared(t, "Confirmation")[w]; state {
				continue
			}
			if _, code := declared(t, "Code")[w]; code && w != RecordConfirmation && w != RecordEligibility {
				continue
			}
			names = append(names, w)
		}
		names = append(names, effectReportDoc(t, proto)...)
		match(t, "record", records, names)
	})
	t.Run("notice kinds", func(t *testing.T) {
		var doc []string
		for _, line := range strings.Split(section(t, proto, "## 7. Broadcasts"), "\n") {
			if strings.HasPrefix(line, "| `notice` |") {
				for _, m := range regexp.MustCompile("`([a-z-]+)` \\(").FindAllStringSubmatch(line, -1) {
					doc = append(doc, m[1])
				}
			}
		}
		match(t, "notice kind", declared(t, "Notice"), doc)
	})
	t.Run("receipt states", func(t *testing.T) {
		var doc []string
		for _, m := range regexp.MustCompile("`receipt` \\(([^)]*)\\)").FindAllStringSubmatch(section(t, proto, "## 6. Commands"), -1) {
			doc = append(doc, ticks(m[1])...)
		}
		match(t, "receipt state", declared(t, "Receipt"), doc)
	})
	t.Run("stop states", func(t *testing.T) {
		m := regexp.MustCompile("`state` \\(([^)]*)\\)").FindStringSubmatch(section(t, proto, "### stop"))
		if m == nil {
			t.Fatal("docs/protocol.md ### stop lists no states")
		}
		match(t, "stop state", declared(t, "Stop"), ticks(m[1]))
	})
}

// effectReportDoc returns effectReport when the stop section names it: it
// is a field of a stop, not a line of its own.
func effectReportDoc(t *testing.T, proto string) []string {
	if strings.Contains(section(t, proto, "### stop"), "`effectReport`") {
		return []string{"effectReport"}
	}
	return nil
}

// ambiguous are codes that are also ordinary words elsewhere (a JSON key
// of Pi's, a flag name, a state, an audit event): a literal of one is a
// code only where it stands as one, so only those places are checked.
var ambiguous = map[string]string{
	"usage":         "a JSON key of Pi's records",
	"hello-timeout": "the serve flag",
	"confirmation":  "the audit event and a record name",
	"eligibility":   "a record name",
	"fenced":        "a stop state and an engine state",
	"busy":          "an engine state",
	"engine-alive":  "a claims.Verdict",
	"declined":      "a confirmation state",
	"preflight":     "a binding field",
	"target":        "a field name",
	"malformed":     "a word of messages",
}

// TestNoCodeLiterals keeps refusal codes spelled through the constants:
// no non-test file of the module outside this package writes a code as a
// string literal, and no Wrap formats its own cause again.
func TestNoCodeLiterals(t *testing.T) {
	codes := declared(t, "Code")
	for w := range ambiguous {
		if _, ok := codes[w]; !ok {
			t.Errorf("ambiguous lists %q, which is no code", w)
		}
	}
	fset := token.NewFileSet()
	found := 0
	err := filepath.WalkDir("..", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path != ".." && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata" || path == filepath.Join("..", "protocol")) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			return err
		}
		found++
		checkFile(t, fset, f, codes)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if found < 50 {
		t.Fatalf("walked %d files; the module has more", found)
	}
}

func checkFile(t *testing.T, fset *token.FileSet, f *ast.File, codes map[string]string) {
	t.Helper()
	where := map[*ast.BasicLit]bool{} // literals standing as a code
	mark := func(e ast.Expr) {
		if lit, ok := e.(*ast.BasicLit); ok && lit.Kind == token.STRING {
			where[lit] = true
		}
	}
	isCode := func(e ast.Expr) bool {
		switch x := e.(type) {
		case *ast.SelectorExpr:
			return x.Sel.Name == "Code"
		case *ast.Ident:
			return x.Name == "code"
		case *ast.CallExpr:
			if s, ok := x.Fun.(*ast.SelectorExpr); ok {
				return s.Sel.Name == "CodeOf"
			}
		}
		return false
	}
	ast.Inspect(f, func(n ast.Node) bool {
		switch x := n.(type) {
		case *ast.ImportSpec:
			return false
		case *ast.ValueSpec:
			for i, id := range x.Names {
				if i >= len(x.Values) || !strings.HasPrefix(id.Name, "Code") || !ast.IsExported(id.Name) {
					continue
				}
				if lit, ok := x.Values[i].(*ast.BasicLit); ok && lit.Kind == token.STRING {
					t.Errorf("%s: %s declares a refusal code outside protocol; declare it in protocol/codes.go and docs/protocol.md", fset.Position(id.Pos()), id.Name)
				}
			}
		case *ast.Field:
			return false // a struct tag is no value, and a field holds no other literal
		case *ast.CallExpr:
			name := ""
			switch fn := x.Fun.(type) {
			case *ast.SelectorExpr:
				name = fn.Sel.Name
			case *ast.Ident:
				name = fn.Name
			}
			if (name == "Refuse" || name == "Wrap") && len(x.Args) > 0 {
				mark(x.Args[0])
			}
			if name == "Wrap" && len(x.Args) > 3 {
				cause := types(x.Args[1])
				for _, a := range x.Args[3:] {
					if cause != "" && types(a) == cause {
						t.Errorf("%s: Wrap formats its cause %s again; Wrap appends it", fset.Position(x.Pos()), cause)
					}
				}
			}
		case *ast.KeyValueExpr:
			if k, ok := x.Key.(*ast.Ident); ok && k.Name == "Code" {
				mark(x.Value)
			}
		case *ast.CompositeLit:
			if isRefusalType(x.Type) && len(x.Elts) > 0 {
				mark(x.Elts[0])
			}
		case *ast.BinaryExpr:
			if isCode(x.X) {
				mark(x.Y)
			}
			if isCode(x.Y) {
				mark(x.X)
			}
		case *ast.AssignStmt:
			for i, l := range x.Lhs {
				if isCode(l) && i < len(x.Rhs) {
					mark(x.Rhs[i])
				}
			}
		case *ast.SwitchStmt:
			if x.Tag != nil && isCode(x.Tag) {
				for _, s := range x.Body.List {
					for _, e := range s.(*ast.CaseClause).List {
						mark(e)
					}
				}
			}
		case *ast.BasicLit:
			if x.Kind != token.STRING {
				return true
			}
			v, err := strconv.Unquote(x.Value)
			if err != nil {
				return true
			}
			name, code := codes[v]
			if !code {
				return true
			}
			if _, amb := ambiguous[v]; amb && !where[x] {
				return true
			}
			t.Errorf("%s: the literal %q is protocol.%s", fset.Position(x.Pos()), v, name)
		}
		return true
	})
}

// types renders a simple expression (an identifier or a selector) so two
// mentions of one variable compare equal; "" for anything else.
func types(e ast.Expr) string {
	switch x := e.(type) {
	case *ast.Ident:
		return x.Name
	case *ast.SelectorExpr:
		if s := types(x.X); s != "" {
			return s + "." + x.Sel.Name
		}
	}
	return ""
}

func isRefusalType(e ast.Expr) bool {
	switch x := e.(type) {
	case *ast.Ident:
		return x.Name == "Refusal"
	case *ast.SelectorExpr:
		return x.Sel.Name == "Refusal"
	case *ast.UnaryExpr:
		return isRefusalType(x.X)
	}
	return false
}
