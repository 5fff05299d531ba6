package pi

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"

	"github.com/mosaic-agents/mosaic/internal/xdg"
	"github.com/mosaic-agents/mosaic/protocol"
)

// fileEntry is one file of the pinned tree: what the digest covers (path,
// type and permission, size, content hash or link target) and the stat
// fields that let a later check skip re-reading an unchanged file.
type fileEntry struct {
	Path   string `json:"path"`
	Mode   uint32 `json:"mode"` // fs.FileMode: type bits and permissions
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256,omitempty"` // regular files
	Link   string `json:"link,omitempty"`   // symlinks: the target, not followed
	// The stat fingerprint. ctime cannot be set from user space, so a
	// rewrite that restores size and mtime still changes it.
	Dev   uint64 `json:"dev"`
	Ino   uint64 `json:"ino"`
	Mtime int64  `json:"mtime_ns"`
	Ctime int64  `json:"ctime_ns"`
}

// sameStat reports whether two entries have the same fingerprint.
func (a fileEntry) sameStat(b fileEntry) bool {
	return a.Path == b.Path && a.Mode == b.Mode && a.Size == b.Size && a.Dev == b.Dev && a.Ino == b.Ino &&
		a.Mtime == b.Mtime && a.Ctime == b.Ctime
}

// packageRoots returns the real directories of the package at dir and of
// every package it can load by name: its dependencies, optional and peer
// dependencies, and theirs, each resolved as Node resolves a bare
// specifier (the nearest node_modules/NAME going up from the importing
// package's real path, then Node's global folders). A dependency that is
// not installed loads nothing and adds nothing; one planted later in any
// of those places becomes a root, and so a change of the digest.
func packageRoots(dir string, globals []string) ([]string, error) {
	real, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return nil, protocol.Wrap(protocol.CodePinMismatch, err, "resolve package %s", dir)
	}
	seen := map[string]bool{real: true}
	queue := []string{real}
	for len(queue) > 0 {
		d := queue[0]
		queue = queue[1:]
		deps, err := readDeps(filepath.Join(d, "package.json"))
		if err != nil {
			return nil, err
		}
		for _, name := range deps {
			found := resolveBare(d, name, globals)
			if found == "" || seen[found] {
				continue
			}
			seen[found] = true
			queue = append(queue, found)
		}
	}
	roots := make([]string, 0, len(seen))
	for r := range seen {
		roots = append(roots, r)
	}
	sort.Strings(roots)
	return roots, nil
}

// readDeps lists the names in a package.json's dependencies,
// optionalDependencies and peerDependencies.
func readDeps(path string) ([]string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, protocol.Wrap(protocol.CodePinMismatch, err, "read %s", path)
	}
	var pkg struct {
		Deps     map[string]string `json:"dependencies"`
		Optional map[string]string `json:"optionalDependencies"`
		Peer     map[string]string `json:"peerDependencies"`
	}
	if err := json.Unmarshal(b, &pkg); err != nil {
		return nil, protocol.Wrap(protocol.CodePinMismatch, err, "decode %s", path)
	}
	var names []string
	for _, m := range []map[string]string{pkg.Deps, pkg.Optional, pkg.Peer} {
		for n := range m {
			// A name is "x" or "@scope/x"; anything else cannot be a
			// directory under node_modules and is not followed.
			if n == "" || strings.Contains(n, "..") || strings.Count(n, "/") > 1 || strings.Count(n, "/") == 1 && n[0] != '@' {
				continue
			}
			names = append(names, n)
		}
	}
	sort.Strings(names)
	return names, nil
}

// resolveBare finds name as Node's module resolution does from a file in
// the package at dir: dir/node_modules/name, then each ancestor's
// node_modules (skipping directories that are themselves node_modules),
// then the global folders. It returns the package's real path, or "" if
// none is installed.
func resolveBare(dir, name string, globals []string) string {
	for d := dir; ; d = filepath.Dir(d) {
		if filepath.Base(d) != "node_modules" {
			if real := packageAt(filepath.Join(d, "node_modules", name)); real != "" {
				return real
			}
		}
		if filepath.Dir(d) == d {
			break
		}
	}
	for _, g := range globals {
		if real := packageAt(filepath.Join(g, name)); real != "" {
			return real
		}
	}
	return ""
}

// packageAt returns the real path of dir if it holds a package.json.
func packageAt(dir string) string {
	if fi, err := os.Stat(filepath.Join(dir, "package.json")); err != nil || !fi.Mode().IsRegular() {
		return ""
	}
	real, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return ""
	}
	return real
}

// nodeGlobals are Node's last-resort folders for a bare name
// (Module._initPaths): $HOME/.node_modules, $HOME/.node_libraries and
// PREFIX/lib/node, PREFIX being the directory above the node binary's.
// NODE_PATH is never passed to the engine, so it is not among them.
func nodeGlobals(node string) []string {
	var g []string
	if home, err := os.UserHomeDir(); err == nil {
		g = append(g, filepath.Join(home, ".node_modules"), filepath.Join(home, ".node_libraries"))
	}
	if node != "" {
		g = append(g, filepath.Join(filepath.Dir(filepath.Dir(node)), "lib", "node"))
	}
	return g
}

// listTree walks every root (a root inside another is walked once) and
// returns the stat of every non-directory in path order, without reading
// any file.
func listTree(roots []string) ([]fileEntry, error) {
	var out []fileEntry
	var walked []string
	for _, root := range roots {
		inside := false
		for _, w := range walked {
			if root == w || strings.HasPrefix(root, w+string(filepath.Separator)) {
				inside = true
				break
			}
		}
		if inside {
			continue
		}
		walked = append(walked, root)
		err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			e, err := statEntry(p)
			if err != nil {
				return err
			}
			out = append(out, e)
			return nil
		})
		if err != nil {
			return nil, protocol.Wrap(protocol.CodePinMismatch, err, "read the engine package %s", root)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out, nil
}

// fillTree gives every entry its content hash or link target: from known
// where the stat fingerprint is the same, else by reading the file.
func fillTree(entries []fileEntry, known map[string]fileEntry) error {
	for i := range entries {
		e := &entries[i]
		if k, ok := known[e.Path]; ok && k.sameStat(*e) {
			e.SHA256, e.Link = k.SHA256, k.Link
			continue
		}
		if err := fillContent(e); err != nil {
			return protocol.Wrap(protocol.CodePinMismatch, err, "read the engine package")
		}
	}
	return nil
}

// statDigest is the SHA-256 over every entry's stat fingerprint: equal
// to the cached one, no file changed since the manifest was written.
func statDigest(entries []fileEntry) string {
	h := sha256.New()
	var buf []byte
	for _, e := range entries {
		buf = append(buf[:0], e.Path...)
		buf = fmt.Appendf(buf, "\x00%o\x00%d\x00%d\x00%d\x00%d\x00%d\n", e.Mode, e.Size, e.Dev, e.Ino, e.Mtime, e.Ctime)
		h.Write(buf)
	}
	return hex.EncodeToString(h.Sum(nil))
}

func statEntry(p string) (fileEntry, error) {
	fi, err := os.Lstat(p)
	if err != nil {
		return fileEntry{}, err
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return fileEntry{}, fmt.Errorf("stat %s: no stat_t", p)
	}
	return fileEntry{Path: p, Mode: uint32(fi.Mode()), Size: fi.Size(), Dev: uint64(st.Dev), Ino: st.Ino,
		Mtime: st.Mtim.Nano(), Ctime: st.Ctim.Nano()}, nil
}

// fillContent hashes a regular file or reads a link's target; other file
// types (a fifo, a socket) are covered by their type alone.
func fillContent(e *fileEntry) error {
	switch m := fs.FileMode(e.Mode); {
	case m.IsRegular():
		sum, err := hashPath(e.Path)
		if err != nil {
			return err
		}
		e.SHA256 = sum
	case m&fs.ModeSymlink != 0:
		t, err := os.Readlink(e.Path)
		if err != nil {
			return err
		}
		e.Link = t
	}
	return nil
}

// treeDigest is the SHA-256 over every entry's path, type and
// permissions, size and content hash (or link target), in path order.
func treeDigest(entries []fileEntry) string {
	h := sha256.New()
	for _, e := range entries {
		fmt.Fprintf(h, "%s\x00%o\x00%d\x00%s\x00%s\n", e.Path, e.Mode, e.Size, e.SHA256, e.Link)
	}
	return hex.EncodeToString(h.Sum(nil))
}

func hashPath(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", fmt.Errorf("hash %s: %w", path, err)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// manifest is the stat cache of one pin, kept between spawns so the
// check before each spawn re-reads only files whose fingerprint changed.
// It holds no authority: a file whose fingerprint matches an entry is
// taken to have that entry's hash, which is what the conversation file,
// just as writable by the user, already asserts through its digest.
type manifest struct {
	Digest     string      `json:"digest"`
	StatDigest string      `json:"stat_digest"`
	Entries    []fileEntry `json:"entries"`
}

// manifestPath is where the manifest of a pin with this digest lives:
// $XDG_STATE_HOME/mosaic/pins/<digest>.json, and beside it
// <digest>.stat, the stat digest alone, which is all a check of an
// unchanged tree reads.
func manifestPath(digest, ext string) (string, error) {
	dir, err := PinDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(dir, digest+ext), nil
}

// PinDir is the directory of the pinned trees' manifests,
// $XDG_STATE_HOME/mosaic/pins.
func PinDir() (string, error) {
	base, err := xdg.StateHome()
	if err != nil {
		return "", err
	}
	return filepath.Join(base, "mosaic", "pins"), nil
}

// cachedStatDigest returns the stat digest saved with digest's manifest.
func cachedStatDigest(digest string) string {
	p, err := manifestPath(digest, ".stat")
	if err != nil {
		return ""
	}
	b, err := os.ReadFile(p)
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

func loadManifest(digest string) map[string]fileEntry {
	p, err := manifestPath(digest, ".json")
	if err != nil {
		return nil
	}
	b, err := os.ReadFile(p)
	if err != nil {
		return nil
	}
	var m manifest
	if json.Unmarshal(b, &m) != nil || m.Digest != digest {
		return nil
	}
	known := make(map[string]fileEntry, len(m.Entries))
	for _, e := range m.Entries {
		known[e.Path] = e
	}
	return known
}

// saveManifest writes the cache (the manifest, then its stat digest, so
// a crash between the two leaves a stale .stat that only costs a
// re-scan); failing to write is only slower next time.
func saveManifest(digest string, entries []fileEntry) {
	st := statDigest(entries)
	b, err := json.Marshal(manifest{Digest: digest, StatDigest: st, Entries: entries})
	if err != nil {
		return
	}
	if writeCache(digest, ".json", b) == nil {
		writeCache(digest, ".stat", []byte(st+"\n"))
	}
}

func writeCache(digest, ext string, b []byte) error {
	p, err := manifestPath(digest, ext)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(p), ".manifest-*")
	if err != nil {
		return err
	}
	_, werr := tmp.Write(b)
	cerr := tmp.Close()
	if err := errors.Join(werr, cerr); err != nil {
		os.Remove(tmp.Name())
		return err
	}
	if err := os.Rename(tmp.Name(), p); err != nil {
		os.Remove(tmp.Name())
		return err
	}
	return nil
}

// PackageDigest computes the digest of the package at dir and everything
// it can load by name when run by node, and caches its manifest. conv
// add calls it once.
func PackageDigest(dir, node string) (string, error) {
	roots, err := packageRoots(dir, nodeGlobals(node))
	if err != nil {
		return "", err
	}
	entries, err := listTree(roots)
	if err != nil {
		return "", err
	}
	if err := fillTree(entries, nil); err != nil {
		return "", err
	}
	d := treeDigest(entries)
	saveManifest(d, entries)
	return d, nil
}

// checkPackageDigest re-checks the tree before a spawn. The cheap path is
// a walk and an lstat of every file, whose stat digest matches the one
// cached with the manifest; otherwise the files whose fingerprint
// differs (all of them without a manifest) are re-hashed and the digest
// recomputed.
func checkPackageDigest(dir, node, want string) error {
	roots, err := packageRoots(dir, nodeGlobals(node))
	if err != nil {
		return err
	}
	entries, err := listTree(roots)
	if err != nil {
		return err
	}
	if st := cachedStatDigest(want); st != "" && st == statDigest(entries) {
		return nil
	}
	known := loadManifest(want)
	if err := fillTree(entries, known); err != nil {
		return err
	}
	if got := treeDigest(entries); got != want {
		return protocol.Refuse(protocol.CodePinMismatch, "the engine package %s changed since it was pinned (%s); reinstall it, or if the change is yours, pin it again: mosaicctl conv add ... --engine PATH --replace",
			dir, describeChange(known, entries))
	}
	saveManifest(want, entries)
	return nil
}

// describeChange names up to three files that differ from the manifest,
// so the refusal points at what changed.
func describeChange(known map[string]fileEntry, entries []fileEntry) string {
	if known == nil {
		return "digest differs"
	}
	var names []string
	now := map[string]bool{}
	for _, e := range entries {
		now[e.Path] = true
		k, ok := known[e.Path]
		switch {
		case !ok:
			names = append(names, "added "+e.Path)
		case k.SHA256 != e.SHA256 || k.Link != e.Link || k.Mode != e.Mode:
			names = append(names, "changed "+e.Path)
		}
	}
	for p := range known {
		if !now[p] {
			names = append(names, "removed "+p)
		}
	}
	sort.Strings(names)
	if len(names) > 3 {
		names = append(names[:3], fmt.Sprintf("and %d more", len(names)-3))
	}
	if len(names) == 0 {
		return "digest differs"
	}
	return strings.Join(names, ", ")
}
