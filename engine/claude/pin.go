package claude

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/mosaic-agents/mosaic/protocol"
)

// The only Claude Code release this adapter was checked against: the
// frame table, the argv and the environment come from its probe
// (reference/claude-code-2.1.328/DIGEST.md).
const (
	PinnedPackage = "@anthropic-ai/claude-code"
	PinnedVersion = "2.1.328"
	// PinnedSHA256 is the linux-x64 native binary the digest recorded
	// (contrib/claude/install.sh checks it too).
	PinnedSHA256 = "a982d38030b97e750848add2cbb2df6d9a70d5544a22ca9b216a349ba25865e8"
)

// versionTimeout bounds `claude --version` at Resolve.
const versionTimeout = 30 * time.Second

// Pin records the executable a conversation runs: its resolved path,
// the version it reported, and the SHA-256 of its bytes. Taken at conv
// add (Resolve), checked before every spawn (Check).
type Pin struct {
	Path    string `toml:"path" json:"path"`
	Version string `toml:"version" json:"version"`
	SHA256  string `toml:"sha256" json:"sha256"`
}

// Resolve pins the Claude Code executable at path (symlinks resolved):
// it hashes the file and runs `path --version` with the sealed
// environment (traffic off, a throwaway config dir, no credentials). It
// refuses engine-pin-mismatch for a version other than PinnedVersion.
// A binary with another hash but the pinned version is accepted and
// pinned by its own hash: the digest's hash is a CI install check, not a
// platform list (another architecture's binary differs).
func Resolve(ctx context.Context, path string, environ []string) (Pin, error) {
	real, err := filepath.EvalSymlinks(path)
	if err != nil {
		return Pin{}, protocol.Wrap(protocol.CodePinMismatch, err, "claude engine %q not found", path)
	}
	if real, err = filepath.Abs(real); err != nil {
		return Pin{}, protocol.Wrap(protocol.CodePinMismatch, err, "claude engine %q", path)
	}
	sum, err := hashFile(real)
	if err != nil {
		return Pin{}, err
	}
	v, err := version(ctx, real, environ)
	if err != nil {
		return Pin{}, err
	}
	if v != PinnedVersion {
		return Pin{}, protocol.Refuse(protocol.CodePinMismatch,
			"%s is Claude Code %s; this mosaic drives exactly %s (install it with contrib/claude/install.sh)", real, v, PinnedVersion)
	}
	return Pin{Path: real, Version: v, SHA256: sum}, nil
}

// Check re-verifies a pin before a spawn: the pinned version is the one
// this adapter knows and the file still has the pinned bytes. The whole
// file is hashed every time (about a second for the 373 MB binary):
// a cached fingerprint would vouch for bytes nobody read.
func Check(p Pin) error {
	if p.Version != PinnedVersion {
		return protocol.Refuse(protocol.CodePinMismatch, "the conversation pins Claude Code %q; this mosaic drives exactly %s (conv add again)", p.Version, PinnedVersion)
	}
	if !filepath.IsAbs(p.Path) || p.SHA256 == "" {
		return protocol.Refuse(protocol.CodePinMismatch, "the claude pin names no absolute path and hash (conv add again)")
	}
	sum, err := hashFile(p.Path)
	if err != nil {
		return err
	}
	if sum != p.SHA256 {
		return protocol.Refuse(protocol.CodePinMismatch, "%s has sha256 %s, the pin says %s: the binary changed since conv add (reinstall %s or conv add again)", p.Path, sum, p.SHA256, PinnedVersion)
	}
	return nil
}

func hashFile(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", protocol.Wrap(protocol.CodePinMismatch, err, "open claude engine %s", path)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil || !st.Mode().IsRegular() {
		return "", protocol.Refuse(protocol.CodePinMismatch, "claude engine %s is not a regular file", path)
	}
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", protocol.Wrap(protocol.CodePinMismatch, err, "read claude engine %s", path)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// version runs `bin --version` sealed: the forced traffic variables, a
// temporary config and tmp dir, and nothing of the caller's but PATH and
// the locale. The answer is "2.1.328 (Claude Code)".
func version(ctx context.Context, bin string, environ []string) (string, error) {
	dir, err := os.MkdirTemp("", "mosaic-claude-version-")
	if err != nil {
		return "", fmt.Errorf("claude --version: %w", err)
	}
	defer os.RemoveAll(dir)
	env, err := Environ(environ, Dirs{Config: filepath.Join(dir, "config"), Tmp: dir}, nil)
	if err != nil {
		return "", err
	}
	ctx, cancel := context.WithTimeout(ctx, versionTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "--version")
	cmd.Env, cmd.Dir, cmd.Stdin = env, dir, nil
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		return "", protocol.Wrap(protocol.CodePinMismatch, err, "%s --version failed: %s", bin, firstLine(errb.String()))
	}
	v, rest, _ := strings.Cut(strings.TrimSpace(out.String()), " ")
	if rest != "(Claude Code)" {
		return "", protocol.Refuse(protocol.CodePinMismatch, "%s --version said %q, not Claude Code", bin, firstLine(out.String()))
	}
	return v, nil
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	if len(s) > 200 {
		s = s[:200]
	}
	return s
}
