package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	sd "github.com/coreos/go-systemd/v22/dbus"

	"github.com/mosaic-agents/mosaic/internal/owner"
	"github.com/mosaic-agents/mosaic/units"
)

// packageUnitDir is where the mosaic package installs the units.
const packageUnitDir = "/usr/lib/systemd/user"

// unitFix says how to bring a unit file in dir up to date.
func unitFix(dir string) string {
	switch dir {
	case units.GlobalDir:
		return "`sudo mosaicctl install --global`, then `systemctl --user daemon-reload`"
	case packageUnitDir:
		return "reinstall the mosaic package (`sudo apt install --reinstall mosaic`), then `systemctl --user daemon-reload`"
	}
	return "`mosaicctl install`"
}

// checkUnits compares the unit files the user manager loads with what
// `mosaicctl install` would write. The manager reads the directories of
// its own unit search path (UnitPath: the user's, then /etc/systemd/user,
// then /usr/lib/systemd/user, among others) file by file, so the first
// one found is the one that runs; an outdated copy there (say, from an
// install before the package was upgraded) runs old units however current
// the others are. The search path is the manager's, not one this process
// derives from its own XDG_CONFIG_HOME, which a shell can set and the
// manager never see. The comparison renders the templates
// with the binary the installed service names, so units that run another
// mosaicctl are reported as such rather than as outdated. Files current on
// disk that the manager loaded before they changed warn until a reload.
func checkUnits(ctx context.Context) (string, error) {
	dirs, where, err := unitSearchPath(ctx)
	if err != nil {
		return "", err
	}
	found := map[string]string{} // unit name -> path that runs
	data := map[string][]byte{}
	var below []string // current copies that an outdated one shadows
	for _, name := range units.Names {
		for _, d := range dirs {
			p := filepath.Join(d, name)
			b, err := os.ReadFile(p)
			if errors.Is(err, fs.ErrNotExist) {
				continue
			}
			if err != nil {
				return "", failf("", "read unit %s: %v", p, err)
			}
			if _, ok := found[name]; !ok {
				found[name], data[name] = p, b
			} else {
				below = append(below, p)
			}
		}
	}
	if len(found) == 0 {
		return "", failf("", "the mosaic-conv@ units are not installed (none in %s)", where)
	}
	for _, name := range units.Names {
		if found[name] == "" {
			return "", failf("", "%s is not installed (none in %s)", name, where)
		}
	}
	bin, err := unitBinary(data["mosaic-conv@.service"])
	if err != nil {
		return "", failf("", "%s: %v", found["mosaic-conv@.service"], err)
	}
	want, err := units.Render(bin)
	if err != nil {
		return "", failf("", "%s: %v", found["mosaic-conv@.service"], err)
	}
	var paths []string
	for _, f := range want {
		p := found[f.Name]
		paths = append(paths, p)
		got := data[f.Name]
		if !units.IsOurs(got) {
			return "", warnf("if it is your own unit, keep it; otherwise move it away and run `mosaicctl install`",
				"%s was not written by mosaic (no %q line); not compared", p, units.Marker)
		}
		if !bytes.Equal(got, f.Data) {
			dir := filepath.Dir(p)
			fix := unitFix(dir)
			if dir != units.GlobalDir && dir != packageUnitDir && len(below) > 0 {
				fix += " (or `mosaicctl uninstall`, so that " + strings.Join(below, " and ") + " runs)"
			}
			return "", failf(fix, "%s is outdated: %s", p, firstDifference(got, f.Data))
		}
	}
	self, err := selfPath()
	if err != nil {
		return "", err
	}
	if _, err := os.Stat(bin); err != nil {
		return "", failf("install mosaicctl there, or run `mosaicctl install` with the one you use",
			"the units run %s, which is missing: %v", bin, err)
	}
	if copyDir, err := units.BinDir(); !owner.BeyondUser(bin) && (err != nil || !sameFile(filepath.Dir(bin), copyDir)) {
		// Units written before install copied such a binary.
		return "", warnf("`mosaicctl install` (the units then run a copy no engine can reach)",
			"the units run %s, which you, and so any engine of yours, can replace: the next controller would run what a tool put there", bin)
	}
	if !units.SameBinary(bin, self) {
		return "", warnf("run `"+self+" install` if the units should run this mosaicctl",
			"%s are current for %s, but this is %s (another build)", strings.Join(paths, " and "), bin, self)
	}
	if stale := staleLoaded(ctx); len(stale) > 0 {
		return "", warnf("`systemctl --user daemon-reload` (running conversations keep running)",
			"%s are current on disk, but the user manager still runs the old text for %s", strings.Join(paths, " and "), strings.Join(stale, ", "))
	}
	return fmt.Sprintf("%s current (run %s)%s", strings.Join(paths, " and "), bin, dropIns(dirs)), nil
}

// unitSearchPath is the user manager's unit search path, and how to name
// it in a finding. A manager that does not answer (user-manager says so)
// leaves the directories a default one reads.
func unitSearchPath(ctx context.Context) (dirs []string, where string, err error) {
	v, err := units.ReadManagerView(ctx)
	if err == nil {
		return v.UnitPath, "the user manager's unit search path: " + strings.Join(v.UnitPath, " "), nil
	}
	userDir, uerr := units.UserDir()
	if uerr != nil {
		return nil, "", uerr
	}
	dirs = []string{userDir, units.GlobalDir, packageUnitDir}
	return dirs, fmt.Sprintf("%s; the user manager did not say where it reads unit files: %v", strings.Join(dirs, ", "), err), nil
}

// staleLoaded lists the loaded mosaic-conv@ units whose files changed
// since the user manager read them (NeedDaemonReload): an upgrade or an
// install without a reload leaves them running the old text. With no
// user manager to ask it lists nothing (user-manager reports that).
func staleLoaded(ctx context.Context) []string {
	c, err := sd.NewUserConnectionContext(ctx)
	if err != nil {
		return nil
	}
	defer c.Close()
	loaded, err := c.ListUnitsByPatternsContext(ctx, nil, []string{"mosaic-conv@*"})
	if err != nil {
		return nil
	}
	var stale []string
	for _, u := range loaded {
		p, err := c.GetUnitPropertyContext(ctx, u.Name, "NeedDaemonReload")
		if err != nil {
			continue
		}
		if need, ok := p.Value.Value().(bool); ok && need {
			stale = append(stale, u.Name)
		}
	}
	sort.Strings(stale)
	return stale
}

// dropIns names the drop-in directories that amend the units (what
// `systemctl --user edit` writes): they are the user's, not compared, but
// a reader of doctor's line should know they apply.
func dropIns(dirs []string) string {
	var found []string
	for _, d := range dirs {
		for _, name := range units.Names {
			p := filepath.Join(d, name+".d")
			if st, err := os.Stat(p); err == nil && st.IsDir() {
				found = append(found, p)
			}
		}
	}
	if len(found) == 0 {
		return ""
	}
	return "; amended by drop-ins in " + strings.Join(found, ", ")
}

// unitBinary reads the mosaicctl path back from a rendered service file's
// ExecStart= line (units.Render writes it quoted when it holds a space,
// with % doubled).
func unitBinary(service []byte) (string, error) {
	for _, line := range strings.Split(string(service), "\n") {
		rest, ok := strings.CutPrefix(line, "ExecStart=")
		if !ok {
			continue
		}
		var bin string
		if strings.HasPrefix(rest, `"`) {
			end := strings.Index(rest[1:], `"`)
			if end < 0 {
				return "", fmt.Errorf("ExecStart= has an unterminated quote")
			}
			bin = rest[1 : end+1]
		} else {
			bin, _, _ = strings.Cut(rest, " ")
		}
		bin = strings.ReplaceAll(bin, "%%", "%")
		if !filepath.IsAbs(bin) {
			return "", fmt.Errorf("ExecStart= names %q, not an absolute path", bin)
		}
		return bin, nil
	}
	return "", errors.New("no ExecStart= line")
}

// firstDifference names the first line where an installed file differs
// from the current one.
func firstDifference(got, want []byte) string {
	g, w := strings.Split(string(got), "\n"), strings.Split(string(want), "\n")
	for i := 0; i < len(g) || i < len(w); i++ {
		var gl, wl string
		if i < len(g) {
			gl = g[i]
		}
		if i < len(w) {
			wl = w[i]
		}
		if gl != wl {
			return fmt.Sprintf("line %d is %q, current is %q", i+1, gl, wl)
		}
	}
	return "they differ"
}
