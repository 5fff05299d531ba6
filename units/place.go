package units

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/mosaic-agents/mosaic/internal/atomicfile"
	"github.com/mosaic-agents/mosaic/internal/owner"
	"github.com/mosaic-agents/mosaic/internal/xdg"
)

// The units run their binary outside every engine, with the user's whole
// authority: the controller of every conversation. A binary the user can
// replace (`go install`'s ~/go/bin, `make install PREFIX=~/.local`, a
// clone's .build/bin) is one a confined engine can replace too, with a
// rename in a directory the user owns, and the next activation of any
// conversation would run the tool's program. So install runs such a
// binary from a copy of its own, in BinDir, which every engine has hidden
// (controller's hidden directories) and whose parents no engine can
// rename away; a binary the user cannot replace (a package's /usr/bin)
// is run where it is.

// BinDir is where install keeps its copy of mosaicctl:
// $XDG_STATE_HOME/mosaic/bin (~/.local/state/mosaic/bin).
func BinDir() (string, error) {
	base, err := xdg.StateHome()
	if err != nil {
		return "", fmt.Errorf("the directory of mosaicctl's copy: %w", err)
	}
	return filepath.Join(base, "mosaic", "bin"), nil
}

// Placement is what Place decided for a binary.
type Placement struct {
	// Run is the path the units name.
	Run string
	// Copied: Run is BinDir's copy of the binary (Changed: written now,
	// else it already held the same bytes).
	Copied, Changed bool
}

// Place returns where the units should run bin (absolute, symlinks
// resolved): bin itself when the user cannot replace it, else a copy in
// BinDir, written atomically (a controller running the old copy keeps
// it) and only when it differs.
func Place(bin string) (Placement, error) {
	p, err := place(bin)
	if err != nil || !p.Copied {
		return p, err
	}
	if p.Run, err = resolved(p.Run); err != nil {
		return Placement{}, err
	}
	return p, nil
}

// place is Place before the copy's path is resolved.
func place(bin string) (Placement, error) {
	if owner.BeyondUser(bin) {
		return Placement{Run: bin}, nil
	}
	dir, err := BinDir()
	if err != nil {
		return Placement{}, err
	}
	data, err := os.ReadFile(bin)
	if err != nil {
		return Placement{}, fmt.Errorf("read %s to copy it: %w", bin, err)
	}
	run := filepath.Join(dir, "mosaicctl")
	p := Placement{Run: run, Copied: true}
	old, err := os.ReadFile(run)
	if err == nil && bytes.Equal(old, data) {
		return p, nil
	}
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return Placement{}, fmt.Errorf("read the copy %s: %w", run, err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return Placement{}, fmt.Errorf("make %s: %w", dir, err)
	}
	if err := atomicfile.Write(run, data, 0o700); err != nil {
		return Placement{}, err
	}
	p.Changed = true
	return p, nil
}

// resolved is run with its directory's links resolved, which is what the
// engine's masks and the parents they keep in place cover: a link on the
// way (a ~/.local that links elsewhere) could be repointed, the path
// through it with it.
func resolved(run string) (string, error) {
	dir, err := filepath.EvalSymlinks(filepath.Dir(run))
	if err != nil {
		return "", fmt.Errorf("resolve %s: %w", filepath.Dir(run), err)
	}
	return filepath.Join(dir, filepath.Base(run)), nil
}

// SameBinary reports whether the files at a and b hold the same bytes: a
// copy Place made of b, and b, count as the same mosaicctl.
func SameBinary(a, b string) bool {
	if a == b {
		return true
	}
	x, err := os.ReadFile(a)
	if err != nil {
		return false
	}
	y, err := os.ReadFile(b)
	return err == nil && bytes.Equal(x, y)
}
