package main

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	sd "github.com/coreos/go-systemd/v22/dbus"
	"github.com/mosaic-agents/mosaic/scopes"
)

// limitControllers are the cgroup v2 controllers the engine's limits need,
// by the scope property each enforces.
var limitControllers = []struct{ controller, property string }{
	{"memory", "MemoryMax="},
	{"pids", "TasksMax="},
	{"cpu", "CPUQuota="},
}

// checkCgroup: engine scopes, their observation and the cohort proofs need
// cgroup v2 (cgroup.kill, cgroup.events); the limits need the memory, pids
// and cpu controllers delegated to the user manager, whose cgroup's
// cgroup.controllers lists what it may enable below it. Without them
// systemd accepts MemoryMax=, TasksMax= and CPUQuota= and enforces
// nothing, so that is a warning, and a failure once a registered
// conversation sets such a limit.
func checkCgroup(ctx context.Context) (string, error) {
	mount, err := scopes.Cgroup2Mount()
	if err != nil {
		return "", failf("", "no cgroup v2 hierarchy (%v): engine scopes cannot be observed and no stop can be proven", err)
	}
	layout := "at " + mount
	if mount != "/sys/fs/cgroup" {
		layout = "at " + mount + " (a hybrid host: the controllers may be in cgroup v1)"
	}
	cg, err := managerCgroup(ctx)
	if err != nil {
		return "", err
	}
	dir := filepath.Join(mount, cg)
	if _, err := os.Stat(filepath.Join(dir, "cgroup.kill")); err != nil {
		return "", failf("run Linux 5.14 or later", "%s has no cgroup.kill (%v): a force stop cannot kill a cohort at once", dir, err)
	}
	have, err := readControllers(filepath.Join(dir, "cgroup.controllers"))
	if err != nil {
		return "", failf("", "read the user manager's controllers: %v", err)
	}
	var missing, unenforced []string
	for _, lc := range limitControllers {
		if !have[lc.controller] {
			missing = append(missing, lc.controller)
			unenforced = append(unenforced, lc.property)
		}
	}
	found := fmt.Sprintf("cgroup v2 %s; %s has %s", layout, cg, listControllers(have))
	if len(missing) == 0 {
		return found + ": MemoryMax=, TasksMax= and CPUQuota= are enforced", nil
	}
	why, fix := "not delegated to the user manager", delegateFix
	if v1 := boundToV1(missing); len(v1) > 0 {
		why, fix = "held by cgroup v1 hierarchies ("+strings.Join(v1, ", ")+"), so cgroup2 cannot have them", unifiedFix
	}
	notEnforced := fmt.Sprintf("%s; missing %s: %s; so %s are accepted but NOT enforced on this host",
		found, strings.Join(missing, ", "), why, strings.Join(unenforced, ", "))
	if uses := limitsUsing(missing); len(uses) > 0 {
		return "", failf(fix+"; or drop those limits with `mosaicctl conv add ... --replace`", "%s, and %s", notEnforced, strings.Join(uses, "; "))
	}
	return "", warnf(fix, "%s (no registered conversation sets one)", notEnforced)
}

// The two ways a controller is missing from the user manager's cgroup.
const (
	unifiedFix  = "boot with cgroup v2 only (kernel command line systemd.unified_cgroup_hierarchy=1), then check again"
	delegateFix = "delegate the controllers to user managers: /etc/systemd/system/user@.service.d/delegate.conf with " +
		"[Service] Delegate=cpu cpuset io memory pids, `systemctl daemon-reload`, then log out and in (or reboot)"
)

// boundToV1 names those of cs that a cgroup v1 hierarchy holds
// (/proc/cgroups: a non-zero hierarchy id), as on a hybrid host; a
// controller can be in one version's tree only.
func boundToV1(cs []string) []string {
	f, err := os.Open("/proc/cgroups")
	if err != nil {
		return nil
	}
	defer f.Close()
	want := map[string]bool{}
	for _, c := range cs {
		want[c] = true
	}
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) >= 2 && want[fields[0]] && fields[1] != "0" {
			out = append(out, fields[0])
		}
	}
	return out
}

// managerCgroup is the user manager's cgroup, relative to the cgroup2
// mount: its ControlGroup property, else where logind puts it.
func managerCgroup(ctx context.Context) (string, error) {
	if c, err := sd.NewUserConnectionContext(ctx); err == nil {
		defer c.Close()
		if cg, err := managerProperty(ctx, c, "ControlGroup"); err == nil && strings.HasPrefix(cg, "/") {
			return cg, nil
		}
	}
	uid := os.Getuid()
	return fmt.Sprintf("/user.slice/user-%d.slice/user@%d.service", uid, uid), nil
}

func readControllers(p string) (map[string]bool, error) {
	f, err := os.Open(p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	have := map[string]bool{}
	sc := bufio.NewScanner(f)
	sc.Split(bufio.ScanWords)
	for sc.Scan() {
		have[sc.Text()] = true
	}
	return have, sc.Err()
}

func listControllers(have map[string]bool) string {
	if len(have) == 0 {
		return "no controllers"
	}
	var cs []string
	for c := range have {
		cs = append(cs, c)
	}
	sort.Strings(cs)
	return "controllers " + strings.Join(cs, " ")
}

// limitsUsing names the registered conversations that set a limit one of
// the missing controllers would enforce.
func limitsUsing(missing []string) []string {
	list, _, err := registered()
	if err != nil {
		return nil // engine-pins reports a store that does not list
	}
	gone := map[string]bool{}
	for _, m := range missing {
		gone[m] = true
	}
	var out []string
	for _, cv := range list {
		var set []string
		l := cv.Limits
		if gone["memory"] && l.MemoryMax.IsSet() {
			set = append(set, "MemoryMax="+l.MemoryMax.String())
		}
		if gone["pids"] && l.TasksMax.IsSet() {
			set = append(set, "TasksMax="+l.TasksMax.String())
		}
		if gone["cpu"] && l.CPUQuota.IsSet() {
			set = append(set, "CPUQuota="+l.CPUQuota.String())
		}
		if len(set) > 0 {
			out = append(out, "conversation "+cv.ID+" sets "+strings.Join(set, " ")+" (unbounded here)")
		}
	}
	return out
}
