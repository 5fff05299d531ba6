package pi

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"syscall"

	"github.com/mosaic-agents/mosaic/protocol"
)

// maxExtension bounds a pinned extension file: a reviewed extension is a
// source file a person read, not a bundle.
const maxExtension = 4 << 20

// Extension is one reviewed extension file a conversation admits into the
// seal: its real path and the SHA-256 of its bytes at review time. Pi
// loads it with -e under --no-extensions: that file and Pi's built-in
// hidden llama.cpp extension, nothing else (DIGEST §1.5).
type Extension struct {
	Path   string
	SHA256 string
}

// PinExtension pins the extension file at path: resolved to its real
// path (a symlink is followed now, never at spawn), a regular file, not
// an npm: or git: spec or a directory (a directory's package manifest can
// bring skills even under --no-skills), at most 4 MiB.
func PinExtension(path string) (Extension, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return Extension{}, protocol.Wrap(protocol.CodeConfiguration, err, "extension %q", path)
	}
	real, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return Extension{}, protocol.Wrap(protocol.CodeConfiguration, err,
			"extension %q: name one reviewed file (npm: and git: specs and directories are not admitted)", path)
	}
	sum, err := hashExtension(real)
	if err != nil {
		return Extension{}, err
	}
	return Extension{Path: real, SHA256: sum}, nil
}

// CheckExtension verifies before each spawn that the file is still the
// reviewed one: the same path, not a symlink, a regular file with the
// pinned bytes. Pi reads it after this check; the file's directory is the
// user's to keep (docs/security.md).
func CheckExtension(e Extension) error {
	if !filepath.IsAbs(e.Path) || filepath.Clean(e.Path) != e.Path {
		return protocol.Refuse(protocol.CodeConfiguration, "extension %q is not a clean absolute path; add the conversation again", e.Path)
	}
	sum, err := hashExtension(e.Path)
	if err != nil {
		return err
	}
	if sum != e.SHA256 {
		return protocol.Refuse(protocol.CodePinMismatch,
			"extension %s changed since it was pinned (sha256 %s, pinned %s); review it and pin it again with `mosaicctl conv add --extension FILE --replace`",
			e.Path, sum, e.SHA256)
	}
	return nil
}

// hashExtension hashes one regular file, opened without following a
// final symlink.
func hashExtension(path string) (string, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return "", protocol.Wrap(protocol.CodePinMismatch, err, "extension %s (a symlink is refused at spawn)", path)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return "", protocol.Wrap(protocol.CodePinMismatch, err, "extension %s", path)
	}
	if !st.Mode().IsRegular() {
		return "", protocol.Refuse(protocol.CodeConfiguration, "extension %s is a %s, not a regular file: name one reviewed file", path, fileKind(st.Mode()))
	}
	if st.Size() > maxExtension {
		return "", protocol.Refuse(protocol.CodeConfiguration, "extension %s has %d bytes, over %d: name one reviewed source file", path, st.Size(), maxExtension)
	}
	h := sha256.New()
	if _, err := io.Copy(h, io.LimitReader(f, maxExtension+1)); err != nil {
		return "", protocol.Wrap(protocol.CodePinMismatch, err, "hash extension %s", path)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

func fileKind(m os.FileMode) string {
	switch {
	case m.IsDir():
		return "directory"
	case m&os.ModeNamedPipe != 0:
		return "named pipe"
	case m&os.ModeDevice != 0:
		return "device"
	case m&os.ModeSocket != 0:
		return "socket"
	}
	return fmt.Sprintf("file of mode %s", m.Type())
}
