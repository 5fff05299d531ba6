package pi

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/mosaic-agents/mosaic/protocol"
)

// Pinned identifies the only Pi release this adapter was checked against:
// its slash table, event list and framing come from this version's source.
const (
	PinnedPackage = "@earendil-works/pi-coding-agent"
	PinnedVersion = "0.85.1"
)

// Pin records which engine a conversation runs: the package version, the
// SHA-256 of the entry file, a digest of every file the package can load
// (the package tree and the dependencies it resolves by name) and the
// interpreter that runs it (path, version, SHA-256). It is taken at conv
// add time (Resolve) and checked before every spawn (Check).
type Pin struct {
	Version string `toml:"version" json:"version"`
	// Entry is the resolved, symlink-free entry file (dist/bundle/cli.js).
	Entry string `toml:"entry" json:"entry"`
	// SHA256 is the hex digest of Entry's bytes.
	SHA256 string `toml:"sha256" json:"sha256"`
	// PackageDir is the package root holding package.json.
	PackageDir string `toml:"package_dir" json:"packageDir"`
	// PackageDigest covers every file of the package tree and of the
	// packages it can load by name (tree.go).
	PackageDigest string `toml:"package_digest" json:"packageDigest"`
	// Node is the interpreter Entry runs with, always explicitly
	// (argv[0]), so the PATH of the user manager does not choose it:
	// the node a contrib/pi/install.sh wrapper names, else the one the
	// entry's "#!/usr/bin/env node" finds on the user's PATH at conv
	// add, else --node. NodeVersion is its `node --version` (checked
	// against Pi's engines.node), NodeSHA256 its bytes.
	Node        string `toml:"node" json:"node"`
	NodeVersion string `toml:"node_version" json:"nodeVersion"`
	NodeSHA256  string `toml:"node_sha256" json:"nodeSHA256"`
}

type packageJSON struct {
	Name    string          `json:"name"`
	Version string          `json:"version"`
	Bin     json.RawMessage `json:"bin"`
	Engines struct {
		Node string `json:"node"`
	} `json:"engines"`
}

// ResolveOptions say how Resolve finds the interpreter.
type ResolveOptions struct {
	// Node names the interpreter (conv add --node); "" means the one a
	// wrapper names, else the entry's #! line resolved in PATH.
	Node string
	// PATH is the search path for a bare engine name and for
	// "#!/usr/bin/env node": the user's PATH where conv add runs.
	PATH string
}

// Resolve finds the engine behind path (the pi executable, a symlink to
// it, or the entry file; a bare name is looked up in opts.PATH) and its
// interpreter, and returns their pin. It refuses engine-pin-mismatch for
// a package other than the pinned one, another version, a file that is
// not the package's pi entry, or an interpreter that is missing or older
// than Pi's engines.node.
func Resolve(path string, opts ResolveOptions) (Pin, error) {
	if !strings.ContainsRune(path, filepath.Separator) {
		found, err := lookPath(path, opts.PATH)
		if err != nil {
			return Pin{}, protocol.Wrap(protocol.CodePinMismatch, err, "engine %q not found", path)
		}
		path = found
	}
	entry, err := filepath.EvalSymlinks(path)
	if err != nil {
		return Pin{}, protocol.Wrap(protocol.CodePinMismatch, err, "resolve engine %q", path)
	}
	if entry, err = filepath.Abs(entry); err != nil {
		return Pin{}, fmt.Errorf("resolve engine %q: %w", path, err)
	}
	node, wrapped, err := readWrapper(entry)
	if err != nil {
		return Pin{}, err
	}
	if wrapped != "" {
		if entry, err = filepath.EvalSymlinks(wrapped); err != nil {
			return Pin{}, protocol.Wrap(protocol.CodePinMismatch, err, "resolve entry named by wrapper %s", path)
		}
	}
	dir, pkg, err := findPackage(entry)
	if err != nil {
		return Pin{}, err
	}
	if pkg.Name != PinnedPackage {
		// Another npm package: as much a wrong path as no package at all,
		// where another version of Pi is a pin that does not match.
		return Pin{}, notPi(entry, fmt.Sprintf("its package %s is %q", dir, pkg.Name))
	}
	if err := checkPackage(pkg, dir, entry); err != nil {
		return Pin{}, err
	}
	sum, err := hashFile(entry)
	if err != nil {
		return Pin{}, err
	}
	if opts.Node != "" {
		node = opts.Node
	}
	node, isNode, err := findNode(entry, node, opts.PATH)
	if err != nil {
		return Pin{}, err
	}
	version := ""
	if isNode {
		if version, err = nodeVersion(node); err != nil {
			return Pin{}, err
		}
		if err := checkNodeRange(node, version, pkg.Engines.Node); err != nil {
			return Pin{}, err
		}
	}
	nodeSum, err := hashPath(node)
	if err != nil {
		return Pin{}, protocol.Wrap(protocol.CodePinMismatch, err, "hash interpreter %s", node)
	}
	digest, err := PackageDigest(dir, node)
	if err != nil {
		return Pin{}, err
	}
	return Pin{Version: pkg.Version, Entry: entry, SHA256: sum, PackageDir: dir, PackageDigest: digest,
		Node: node, NodeVersion: version, NodeSHA256: nodeSum}, nil
}

// wrapperHead bounds how much of a file readWrapper looks at.
const wrapperHead = 4096

// readWrapper recognises the shell wrapper contrib/pi/install.sh writes,
// which names its entry and node in "# pi-entry: PATH" and
// "# pi-node: PATH" comment lines, and returns those paths; for any other
// file it returns empty strings.
func readWrapper(path string) (node, entry string, err error) {
	f, err := os.Open(path)
	if err != nil {
		return "", "", protocol.Wrap(protocol.CodePinMismatch, err, "open engine %s", path)
	}
	defer f.Close()
	head := make([]byte, wrapperHead)
	n, _ := io.ReadFull(f, head)
	text := string(head[:n])
	if !strings.HasPrefix(text, "#!/bin/sh") {
		return "", "", nil
	}
	for _, line := range strings.Split(text, "\n") {
		if v, ok := strings.CutPrefix(line, "# pi-entry: "); ok {
			entry = strings.TrimSpace(v)
		}
		if v, ok := strings.CutPrefix(line, "# pi-node: "); ok {
			node = strings.TrimSpace(v)
		}
	}
	if entry != "" && !filepath.IsAbs(entry) || node != "" && !filepath.IsAbs(node) {
		return "", "", protocol.Refuse(protocol.CodePinMismatch, "wrapper %s names relative paths", path)
	}
	return node, entry, nil
}

// Check re-reads the pinned package, entry file, package tree and
// interpreter and refuses engine-pin-mismatch, naming the fix, if any of
// them changed or is missing. Call it right before spawn. The tree and
// the interpreter are re-hashed only where their stat fingerprints
// (size, mtime, ctime, inode) differ from the manifest cached at the
// previous check.
func Check(p Pin) error {
	pkg, err := readPackage(filepath.Join(p.PackageDir, "package.json"))
	if err != nil {
		return err
	}
	if pkg.Version != p.Version {
		return protocol.Refuse(protocol.CodePinMismatch, "engine version is %s, pinned %s", pkg.Version, p.Version)
	}
	if err := checkPackage(pkg, p.PackageDir, p.Entry); err != nil {
		return err
	}
	sum, err := hashFile(p.Entry)
	if err != nil {
		return err
	}
	if sum != p.SHA256 {
		return protocol.Refuse(protocol.CodePinMismatch, "engine entry %s has sha256 %s, pinned %s", p.Entry, sum, p.SHA256)
	}
	if p.PackageDigest == "" {
		return protocol.Refuse(protocol.CodePinMismatch,
			"the conversation pins only the entry file of %s (added before mosaic pinned the whole package); pin it: mosaicctl conv add ... --engine PATH --replace", p.PackageDir)
	}
	if err := checkPackageDigest(p.PackageDir, p.Node, p.PackageDigest); err != nil {
		return err
	}
	return checkNode(p, pkg.Engines.Node)
}

// findPackage walks up from the entry to the nearest package.json.
func findPackage(entry string) (string, packageJSON, error) {
	for dir := filepath.Dir(entry); ; dir = filepath.Dir(dir) {
		pj := filepath.Join(dir, "package.json")
		if _, err := os.Stat(pj); err == nil {
			pkg, err := readPackage(pj)
			return dir, pkg, err
		}
		if parent := filepath.Dir(dir); parent == dir {
			return "", packageJSON{}, notPi(entry, "no package.json above it")
		}
	}
}

// notPi refuses an engine path that is no Pi install at all (/bin/true,
// another package's bin) with configuration, not engine-pin-mismatch:
// nothing was pinned that could have changed, the path is wrong, and the
// fix is another --engine.
func notPi(entry, why string) error {
	return protocol.Refuse(protocol.CodeConfiguration,
		"engine %s is not Pi: %s; point --engine at the pi executable of a %s@%s install "+
			"(`bash contrib/pi/install.sh` installs one and prints its path; `command -v pi` prints the one on PATH)",
		entry, why, PinnedPackage, PinnedVersion)
}

func readPackage(path string) (packageJSON, error) {
	var pkg packageJSON
	b, err := os.ReadFile(path)
	if err != nil {
		return pkg, protocol.Wrap(protocol.CodePinMismatch, err, "read %s", path)
	}
	if err := json.Unmarshal(b, &pkg); err != nil {
		return pkg, protocol.Wrap(protocol.CodePinMismatch, err, "decode %s", path)
	}
	return pkg, nil
}

// checkPackage refuses unless pkg is the pinned package and version and
// entry is its pi bin.
func checkPackage(pkg packageJSON, dir, entry string) error {
	if pkg.Name != PinnedPackage || pkg.Version != PinnedVersion {
		return protocol.Refuse(protocol.CodePinMismatch, "engine package is %s@%s, need %s@%s", pkg.Name, pkg.Version, PinnedPackage, PinnedVersion)
	}
	var bins map[string]string
	if err := json.Unmarshal(pkg.Bin, &bins); err != nil || bins["pi"] == "" {
		return protocol.Refuse(protocol.CodePinMismatch, "package %s declares no pi bin", dir)
	}
	want, err := filepath.EvalSymlinks(filepath.Join(dir, bins["pi"]))
	if err != nil {
		return protocol.Wrap(protocol.CodePinMismatch, err, "resolve pi bin of %s", dir)
	}
	if want != entry {
		return protocol.Refuse(protocol.CodePinMismatch, "engine %s is not the package's pi entry %s", entry, want)
	}
	return nil
}

func hashFile(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", protocol.Wrap(protocol.CodePinMismatch, err, "open engine entry")
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", protocol.Wrap(protocol.CodePinMismatch, err, "hash engine entry")
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
