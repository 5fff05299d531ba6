package history

import (
	"os"
	"path/filepath"
	"strings"

	"github.com/mosaic-agents/mosaic/protocol"
)

// checkCwd refuses foreign-project unless the header cwd is absolute and
// the project or inside it. Real paths are compared (EvalSymlinks reads
// links, opens no file); a cwd that no longer exists is compared as
// written.
func checkCwd(h Header, project, path string) error {
	if !filepath.IsAbs(h.Cwd) {
		return protocol.Refuse(protocol.CodeForeignProject, "session %s has a relative cwd %q", path, cut(h.Cwd))
	}
	proj, err := filepath.EvalSymlinks(project)
	if err != nil {
		return protocol.Wrap(protocol.CodeForeignProject, err, "resolve project %s", project)
	}
	cwd, err := filepath.EvalSymlinks(h.Cwd)
	if err != nil {
		if !os.IsNotExist(err) {
			return protocol.Wrap(protocol.CodeForeignProject, err, "resolve cwd of session %s", path)
		}
		cwd = filepath.Clean(h.Cwd)
	}
	if cwd != proj && !strings.HasPrefix(cwd, proj+string(filepath.Separator)) {
		return protocol.Refuse(protocol.CodeForeignProject, "session %s has cwd %q outside project %s", path, cut(h.Cwd), project)
	}
	return nil
}
