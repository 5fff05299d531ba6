package conversations

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/mosaic-agents/mosaic/internal/detour"
	"github.com/mosaic-agents/mosaic/protocol"
)

// CheckPaths checks c's paths on disk: the project is a real directory, no
// component of it or of the session path is a symlink, the sessions
// directory exists and the session file, if present, is a regular file.
// For a Claude conversation it checks the env file instead, and an
// adopted session's transcript (checkClaudeFiles).
func (c *Conversation) CheckPaths() error {
	if err := checkNoSymlinks("project", c.Project); err != nil {
		return err
	}
	fi, err := os.Stat(c.Project)
	if err != nil {
		return protocol.Wrap(protocol.CodeConfiguration, err, "project %q does not exist or cannot be read; create it or pass the right --project", c.Project)
	}
	if !fi.IsDir() {
		return refuseField("project", c.Project, "is not a directory")
	}
	if c.IsClaude() {
		return c.checkClaudeFiles()
	}
	dir := filepath.Dir(c.Session)
	if err := checkNoSymlinks("session", dir); err != nil {
		return err
	}
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		return protocol.Refuse(protocol.CodeConfiguration,
			"session directory %q does not exist; create it (mkdir -p %s) or run Pi once for seat %q", dir, dir, c.Seat)
	}
	fi, err = os.Lstat(c.Session)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil // a new conversation: Pi writes the file lazily
	case err != nil:
		return protocol.Wrap(protocol.CodeConfiguration, err, "session %q", c.Session)
	case fi.Mode()&fs.ModeSymlink != 0:
		return refuseField("session", c.Session, "is a symlink; name the real file")
	case !fi.Mode().IsRegular():
		return refuseField("session", c.Session, "is not a regular file")
	}
	return nil
}

// checkNoSymlinks refuses the absolute path p when a component of it, as
// far as it exists, is a symlink or, before the last, not a directory.
func checkNoSymlinks(field, p string) error {
	d, err := detour.Find(p)
	switch {
	case err != nil:
		return protocol.Wrap(protocol.CodeConfiguration, err, "%s %q", field, p)
	case d.At == "":
		return nil
	case !d.Link:
		return protocol.Refuse(protocol.CodeConfiguration, "%s %q: component %s is not a directory", field, p, d.At)
	}
	hint := ""
	if real, err := filepath.EvalSymlinks(p); err == nil {
		hint = fmt.Sprintf("; use the real path %s", real)
	}
	return protocol.Refuse(protocol.CodeConfiguration, "%s %q: component %s is a symlink%s", field, p, d.At, hint)
}
