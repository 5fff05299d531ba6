package pi

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/mosaic-agents/mosaic/protocol"
)

// findNode resolves the interpreter the way the user's own shell runs
// the entry: the node a wrapper names, else the entry's "#!" line, an
// absolute interpreter as written or "/usr/bin/env node" looked up in
// path (the user's PATH at conv add, not the user manager's). The result
// is absolute and symlink-free, so a later `nvm use` or a relinked
// /usr/local/bin/node is a change the pin sees. isNode is false when the
// #! line names another program (a test's shell-script engine): that
// interpreter is pinned by path and hash, without a Node version.
func findNode(entry, wrapperNode, path string) (node string, isNode bool, err error) {
	name := wrapperNode
	if name == "" {
		interp, err := shebang(entry)
		if err != nil {
			return "", false, err
		}
		name = interp
		base := filepath.Base(name)
		isNode = base == "node" || base == "nodejs"
	} else {
		isNode = true
	}
	if !filepath.IsAbs(name) {
		found, err := lookPath(name, path)
		if err != nil {
			return "", false, protocol.Refuse(protocol.CodePinMismatch,
				"the engine %s runs %q, which is not on PATH (%s); install Node %s or name one with --node PATH", entry, name, path, PinnedNodeRange)
		}
		name = found
	}
	real, err := filepath.EvalSymlinks(name)
	if err != nil {
		return "", false, protocol.Wrap(protocol.CodePinMismatch, err, "interpreter %s (name one with --node PATH)", name)
	}
	return real, isNode, nil
}

// shebang returns the interpreter of entry's "#!" line: the program, or
// for "/usr/bin/env [-S] PROG" the PROG that env would search.
func shebang(entry string) (string, error) {
	f, err := os.Open(entry)
	if err != nil {
		return "", protocol.Wrap(protocol.CodePinMismatch, err, "open engine entry %s", entry)
	}
	defer f.Close()
	line, _ := bufio.NewReader(f).ReadString('\n')
	rest, ok := strings.CutPrefix(strings.TrimSpace(line), "#!")
	if !ok {
		return "", protocol.Refuse(protocol.CodePinMismatch, "engine entry %s has no #! line naming its interpreter; name one with --node PATH", entry)
	}
	fields := strings.Fields(rest)
	if len(fields) == 0 {
		return "", protocol.Refuse(protocol.CodePinMismatch, "engine entry %s has an empty #! line; name its interpreter with --node PATH", entry)
	}
	if filepath.Base(fields[0]) != "env" {
		return fields[0], nil
	}
	for _, f := range fields[1:] {
		if !strings.HasPrefix(f, "-") && !strings.Contains(f, "=") {
			return f, nil
		}
	}
	return "", protocol.Refuse(protocol.CodePinMismatch, "engine entry %s: no program on its #! line %q; name its interpreter with --node PATH", entry, line)
}

// lookPath finds an executable name in a PATH list, as a shell does.
func lookPath(name, path string) (string, error) {
	for _, dir := range filepath.SplitList(path) {
		if dir == "" || !filepath.IsAbs(dir) {
			continue // a relative PATH entry depends on the working directory
		}
		p := filepath.Join(dir, name)
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", exec.ErrNotFound
}

// nodeVersion runs `node --version` in an empty environment (no
// NODE_OPTIONS can change what it does) and returns "22.23.3".
func nodeVersion(node string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "--version")
	cmd.Env = []string{}
	out, err := cmd.Output()
	if err != nil {
		return "", protocol.Wrap(protocol.CodePinMismatch, err, "interpreter %s does not run (install Node %s or name one with --node PATH)", node, PinnedNodeRange)
	}
	v := strings.TrimPrefix(strings.TrimSpace(string(out)), "v")
	if _, ok := parseVersion(v); !ok {
		return "", protocol.Refuse(protocol.CodePinMismatch, "interpreter %s printed %q for --version, not a Node version; name Node with --node PATH", node, out)
	}
	return v, nil
}

// PinnedNodeRange is the engines.node of the pinned Pi: what a message
// suggests before the package's own range is known.
const PinnedNodeRange = ">=22.19.0"

// checkNodeRange refuses a version outside an npm engines range. It reads
// the comparator forms a published package uses (">=X.Y.Z", ">", "<",
// "<=", "=", a bare version, "^X.Y.Z", "~X.Y.Z", space-separated sets,
// "||" alternatives); anything else is refused rather than guessed.
func checkNodeRange(node, version, rng string) error {
	v, ok := parseVersion(version)
	if !ok {
		return protocol.Refuse(protocol.CodePinMismatch, "interpreter %s has version %q, not X.Y.Z", node, version)
	}
	if strings.TrimSpace(rng) == "" || strings.TrimSpace(rng) == "*" {
		return nil
	}
	for _, alt := range strings.Split(rng, "||") {
		okAll := true
		for _, c := range strings.Fields(alt) {
			ok, err := satisfies(v, c)
			if err != nil {
				return protocol.Refuse(protocol.CodePinMismatch, "Pi's engines.node %q: %v", rng, err)
			}
			okAll = okAll && ok
		}
		if okAll {
			return nil
		}
	}
	return protocol.Refuse(protocol.CodePinMismatch,
		"interpreter %s is Node %s; Pi needs node %s; install a newer Node and name it with --node PATH (or put it first on PATH), then mosaicctl conv add ... --replace", node, version, rng)
}

func satisfies(v [3]int, c string) (bool, error) {
	op := ""
	for _, p := range []string{">=", "<=", ">", "<", "=", "^", "~", "v"} {
		if strings.HasPrefix(c, p) {
			op, c = p, strings.TrimPrefix(c, p)
			break
		}
	}
	w, ok := parseVersion(strings.TrimPrefix(c, "v"))
	if !ok {
		return false, fmt.Errorf("comparator %q is not a plain version", op+c)
	}
	cmp := compareVersion(v, w)
	switch op {
	case ">=":
		return cmp >= 0, nil
	case ">":
		return cmp > 0, nil
	case "<=":
		return cmp <= 0, nil
	case "<":
		return cmp < 0, nil
	case "^":
		return cmp >= 0 && v[0] == w[0] && (w[0] != 0 || v[1] == w[1]), nil
	case "~":
		return cmp >= 0 && v[0] == w[0] && v[1] == w[1], nil
	}
	return cmp == 0, nil
}

// parseVersion reads "X.Y.Z" (a prerelease or build suffix is refused:
// no released Node has one).
func parseVersion(s string) ([3]int, bool) {
	var v [3]int
	parts := strings.Split(s, ".")
	if len(parts) != 3 {
		return v, false
	}
	for i, p := range parts {
		n, err := strconv.Atoi(p)
		if err != nil || n < 0 || p == "" || p[0] == '+' {
			return v, false
		}
		v[i] = n
	}
	return v, true
}

func compareVersion(a, b [3]int) int {
	for i := range a {
		if a[i] != b[i] {
			if a[i] < b[i] {
				return -1
			}
			return 1
		}
	}
	return 0
}

// checkNode checks the pinned interpreter before a spawn: pinned at all,
// its recorded version inside Pi's engines.node, present, and the same
// bytes (re-hashed only when its stat fingerprint changed).
func checkNode(p Pin, rng string) error {
	if p.Node == "" || p.NodeSHA256 == "" {
		return protocol.Refuse(protocol.CodePinMismatch,
			"the conversation pins no interpreter (added before mosaic pinned Node); pin it: mosaicctl conv add ... --engine PATH --replace")
	}
	if p.NodeVersion != "" { // "" only for an entry whose #! names no node
		if err := checkNodeRange(p.Node, p.NodeVersion, rng); err != nil {
			return err
		}
	}
	e, err := statEntry(p.Node)
	if err != nil {
		return protocol.Wrap(protocol.CodePinMismatch, err, "the pinned interpreter %s is gone (install it again or pin another: mosaicctl conv add ... --node PATH --replace)", p.Node)
	}
	if cachedStatDigest("node-"+p.NodeSHA256) == statDigest([]fileEntry{e}) {
		return nil
	}
	if err := fillContent(&e); err != nil {
		return protocol.Wrap(protocol.CodePinMismatch, err, "read the pinned interpreter %s", p.Node)
	}
	if e.SHA256 != p.NodeSHA256 {
		return protocol.Refuse(protocol.CodePinMismatch,
			"the pinned interpreter %s changed (sha256 %s, pinned %s for Node %s); if you upgraded Node on purpose, pin it again: mosaicctl conv add ... --replace",
			p.Node, e.SHA256, p.NodeSHA256, p.NodeVersion)
	}
	saveManifest("node-"+p.NodeSHA256, []fileEntry{e})
	return nil
}
