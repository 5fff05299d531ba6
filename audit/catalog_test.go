package audit

import (
	"bufio"
	"bytes"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// catalogFile is the journal message catalog the package installs as
// /usr/lib/systemd/catalog/mosaic.catalog.
const catalogFile = "../packaging/catalog/mosaic.catalog"

// catalogEntry is one "-- ID" entry of a catalog file.
type catalogEntry struct {
	headers map[string][]string
	body    string
}

var catalogID = regexp.MustCompile(`^-- ([0-9a-f]{32})$`)

// parseCatalog reads systemd's catalog format (catalog.c): "#" comments
// before the first entry, "-- ID" lines, "Key: value" headers up to the
// first empty line, then the body up to the next entry.
func parseCatalog(data []byte) (map[string]*catalogEntry, []error) {
	out := map[string]*catalogEntry{}
	var errs []error
	errorf := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	var cur *catalogEntry
	inHeaders := false
	var body strings.Builder
	flush := func() {
		if cur != nil {
			cur.body = strings.TrimSpace(body.String())
		}
		body.Reset()
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if m := catalogID.FindStringSubmatch(line); m != nil {
			flush()
			if out[m[1]] != nil {
				errorf("line %d: a second entry for %s", n, m[1])
			}
			cur = &catalogEntry{headers: map[string][]string{}}
			out[m[1]] = cur
			inHeaders = true
			continue
		}
		switch {
		case strings.HasPrefix(line, "--"):
			errorf("line %d: %q is not an entry line (-- and 32 lowercase hex digits, no language)", n, line)
		case cur == nil:
			if line != "" && !strings.HasPrefix(line, "#") {
				errorf("line %d: %q before the first entry", n, line)
			}
		case inHeaders && line == "":
			inHeaders = false
		case inHeaders:
			k, v, ok := strings.Cut(line, ": ")
			if !ok {
				errorf("line %d: header %q is not \"Key: value\"", n, line)
				continue
			}
			cur.headers[k] = append(cur.headers[k], v)
		default:
			body.WriteString(line + "\n")
		}
	}
	flush()
	return out, errs
}

// codeMessageIDs reads the MESSAGE_IDs from the source of audit.go: the
// values of the messageIDs map literal, by the Event constant they key.
func codeMessageIDs(t *testing.T) map[string]string {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), "audit.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	ids := map[string]string{}
	ast.Inspect(f, func(n ast.Node) bool {
		vs, ok := n.(*ast.ValueSpec)
		if !ok || len(vs.Names) != 1 || vs.Names[0].Name != "messageIDs" {
			return true
		}
		for _, elt := range vs.Values[0].(*ast.CompositeLit).Elts {
			kv := elt.(*ast.KeyValueExpr)
			v, err := strconv.Unquote(kv.Value.(*ast.BasicLit).Value)
			if err != nil {
				t.Fatal(err)
			}
			ids[v] = kv.Key.(*ast.Ident).Name
		}
		return false
	})
	if len(ids) == 0 {
		t.Fatal("no messageIDs map literal in audit.go")
	}
	return ids
}

// alwaysSet are the fields every entry of an event carries, so a catalog
// may substitute them (journalctl puts the field's name where an entry
// lacks it).
var alwaysSet = map[Event][]string{Refusal: {"MOSAIC_REFUSAL"}}

// TestCatalogCoversEveryMessageID: every MESSAGE_ID in the code has a
// catalog entry and every entry is a MESSAGE_ID of the code, each entry
// in the shape journalctl -x shows, substituting only fields its entries
// always have.
func TestCatalogCoversEveryMessageID(t *testing.T) {
	data, err := os.ReadFile(catalogFile)
	if err != nil {
		t.Fatal(err)
	}
	catalog, errs := parseCatalog(data)
	for _, err := range errs {
		t.Errorf("%s: %v", catalogFile, err)
	}
	code := codeMessageIDs(t)
	if len(code) != len(messageIDs) {
		t.Fatalf("audit.go's source has %d MESSAGE_IDs, the package %d", len(code), len(messageIDs))
	}
	for ev, id := range messageIDs {
		if _, ok := code[id]; !ok {
			t.Errorf("%s: MESSAGE_ID %s is not in audit.go's source", ev, id)
		}
	}
	var missing, extra []string
	for id, name := range code {
		if catalog[id] == nil {
			missing = append(missing, name+" "+id)
		}
	}
	for id := range catalog {
		if _, ok := code[id]; !ok {
			extra = append(extra, id)
		}
	}
	sort.Strings(missing)
	sort.Strings(extra)
	if len(missing) > 0 {
		t.Errorf("MESSAGE_IDs without a catalog entry in %s: %s", catalogFile, strings.Join(missing, ", "))
	}
	if len(extra) > 0 {
		t.Errorf("catalog entries for no MESSAGE_ID of the code: %s", strings.Join(extra, ", "))
	}
	subst := regexp.MustCompile(`@([A-Z0-9_]+)@`)
	for ev, id := range messageIDs {
		e := catalog[id]
		if e == nil {
			continue
		}
		t.Run(string(ev), func(t *testing.T) {
			for _, h := range []string{"Subject", "Defined-By", "Documentation"} {
				if len(e.headers[h]) == 0 {
					t.Errorf("no %s: header", h)
				}
			}
			if got := e.headers["Defined-By"]; len(got) != 1 || got[0] != "mosaic" {
				t.Errorf("Defined-By: %q, want mosaic", got)
			}
			if len(e.body) < 100 {
				t.Errorf("body %q says too little", e.body)
			}
			ok := map[string]bool{"MOSAIC_EVENT": true, "MOSAIC_CONVERSATION": true}
			for _, f := range alwaysSet[ev] {
				ok[f] = true
			}
			text := strings.Join(e.headers["Subject"], "") + "\n" + e.body
			for _, m := range subst.FindAllStringSubmatch(text, -1) {
				if !ok[m[1]] {
					t.Errorf("substitutes @%s@, which %s entries do not always carry", m[1], ev)
				}
			}
		})
	}
}

// TestParseCatalogRejectsBrokenEntries: the parser the coverage test
// relies on notices a malformed catalog.
func TestParseCatalogRejectsBrokenEntries(t *testing.T) {
	for name, text := range map[string]string{
		"upper-case id":   "-- 22DBBCC40A23478AA737EDAF547C6B0D\nSubject: x\n\nbody\n",
		"header no colon": "-- 22dbbcc40a23478aa737edaf547c6b0d\nSubject x\n\nbody\n",
		"text before":     "stray\n-- 22dbbcc40a23478aa737edaf547c6b0d\nSubject: x\n\nbody\n",
		"duplicate":       "-- 22dbbcc40a23478aa737edaf547c6b0d\nSubject: x\n\nb\n-- 22dbbcc40a23478aa737edaf547c6b0d\nSubject: y\n\nb\n",
	} {
		t.Run(name, func(t *testing.T) {
			if _, errs := parseCatalog([]byte(text)); len(errs) == 0 {
				t.Errorf("parseCatalog accepted %q", text)
			}
		})
	}
}
