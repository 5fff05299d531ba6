package units

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/mosaic-agents/mosaic/internal/atomicfile"
	"github.com/mosaic-agents/mosaic/internal/xdg"
)

// GlobalDir is where admins install units for every user.
const GlobalDir = "/etc/systemd/user"

// UserDir returns the calling user's unit directory,
// $XDG_CONFIG_HOME/systemd/user (~/.config/systemd/user).
func UserDir() (string, error) {
	base, err := xdg.ConfigHome()
	if err != nil {
		return "", err
	}
	return filepath.Join(base, "systemd", "user"), nil
}

// Change says what an install or uninstall did to each file.
type Change struct {
	Path   string
	Action string // "written", "rewritten", "unchanged", "removed", "absent"
}

// ErrForeign means a file of the same name exists that mosaic did not write.
var ErrForeign = errors.New("not written by mosaic")

// Install writes files into dir. A file that is already identical is left
// alone; one of ours that differs is rewritten; one we did not write is
// refused unless force is set. Nothing is written unless every file passes
// that check, so a refusal leaves the directory as it was; and nothing is
// renamed into place until every changed file is written and fsynced, so
// a write that fails (a full disk) leaves it as it was too.
func Install(dir string, files []File, force bool) ([]Change, error) {
	changes := make([]Change, len(files))
	for i, f := range files {
		p := filepath.Join(dir, f.Name)
		changes[i] = Change{Path: p, Action: "written"}
		old, err := os.ReadFile(p)
		switch {
		case errors.Is(err, fs.ErrNotExist):
		case err != nil:
			return nil, fmt.Errorf("read unit %q: %w", p, err)
		case bytes.Equal(old, f.Data):
			changes[i].Action = "unchanged"
		case !IsOurs(old) && !force:
			return nil, fmt.Errorf("unit %q: %w; move it away or pass --force to overwrite it", p, ErrForeign)
		default:
			changes[i].Action = "rewritten"
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("create unit directory %q: %w", dir, err)
	}
	var temps []string
	defer func() {
		for _, t := range temps {
			os.Remove(t) // a no-op once renamed
		}
	}()
	// Every changed file is written and fsynced under a temporary name
	// first: a full disk or a file size limit then fails the install with
	// the directory as it was, never a new socket unit beside an old (or
	// no) service unit.
	for i, f := range files {
		if changes[i].Action == "unchanged" {
			continue
		}
		t, err := stage(changes[i].Path, f.Data)
		if t != "" {
			temps = append(temps, t)
		}
		if err != nil {
			return nil, fmt.Errorf("install unit %q: %w; nothing changed: free space in %s (or raise the file size limit) and run the install again", changes[i].Path, err, dir)
		}
	}
	for i, j := 0, 0; i < len(files); i++ {
		if changes[i].Action == "unchanged" {
			continue
		}
		if err := os.Rename(temps[j], changes[i].Path); err != nil {
			return nil, fmt.Errorf("install unit %q: %w", changes[i].Path, err)
		}
		j++
	}
	if err := atomicfile.SyncDir(dir); err != nil {
		return nil, err
	}
	return changes, nil
}

// stage writes data to a fsynced temporary file beside path and returns
// its name (also on an error after it was created, so it is removed).
func stage(path string, data []byte) (string, error) {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return "", err
	}
	name := f.Name()
	if err := f.Chmod(0o644); err != nil {
		f.Close()
		return name, err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return name, err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return name, err
	}
	return name, f.Close()
}

// Uninstall removes our unit files from dir. A file we did not write is
// refused unless force is set, and then nothing is removed.
func Uninstall(dir string, force bool) ([]Change, error) {
	changes := make([]Change, len(Names))
	for i, name := range Names {
		p := filepath.Join(dir, name)
		changes[i] = Change{Path: p, Action: "removed"}
		old, err := os.ReadFile(p)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			changes[i].Action = "absent"
		case err != nil:
			return nil, fmt.Errorf("read unit %q: %w", p, err)
		case !IsOurs(old) && !force:
			return nil, fmt.Errorf("unit %q: %w; remove it yourself or pass --force", p, ErrForeign)
		}
	}
	for _, c := range changes {
		if c.Action != "removed" {
			continue
		}
		if err := os.Remove(c.Path); err != nil {
			return nil, fmt.Errorf("remove unit %q: %w", c.Path, err)
		}
	}
	if err := atomicfile.SyncDir(dir); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	return changes, nil
}
