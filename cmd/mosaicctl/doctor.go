package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/urfave/cli/v2"
)

// check is one thing doctor looks at: it returns what it found, or an
// error saying what is wrong. A *finding error says how bad (warn or
// fail) and may name its own fix; any other error is a failure whose fix
// is Fix.
type check struct {
	Name string
	Run  func(ctx context.Context) (string, error)
	Fix  string
}

// Verdicts of a check. A warning is something mosaic works without but a
// user should know (and exit stays 0); a failure is a promise mosaic
// cannot keep on this host (exit 1).
const (
	verdictOK   = "ok"
	verdictWarn = "warn"
	verdictFail = "fail"
)

// finding is a check's verdict when it is not ok.
type finding struct {
	verdict string
	msg     string
	fix     string // "" means the check's Fix
}

func (f *finding) Error() string { return f.msg }

// warnf is a warning with its own fix ("" for the check's).
func warnf(fix, format string, args ...any) error {
	return &finding{verdict: verdictWarn, msg: fmt.Sprintf(format, args...), fix: fix}
}

// failf is a failure with its own fix ("" for the check's).
func failf(fix, format string, args ...any) error {
	return &finding{verdict: verdictFail, msg: fmt.Sprintf(format, args...), fix: fix}
}

// checks is doctor's list, in the order printed: what everything else
// needs first.
var checks = []check{
	{
		Name: "user-manager",
		Run:  checkUserManager,
		Fix: "mosaic needs a running systemd user manager on the user bus: log in through PAM/systemd-logind (or " +
			"`loginctl enable-linger $USER`), install dbus-user-session, check `systemctl --user status` and that " +
			"XDG_RUNTIME_DIR=/run/user/$(id -u) is set",
	},
	{
		Name: "xdg-homes",
		Run:  checkHomes,
		Fix:  "the user manager must answer on the user bus (see user-manager)",
	},
	{
		Name: "linger",
		Run:  checkLinger,
		Fix:  "`loginctl enable-linger $USER`: your user manager then starts at boot and stays when you log out",
	},
	{
		Name: "journal",
		Run:  checkJournal,
		Fix: "keep the journal on disk: `sudo mkdir -p /var/log/journal && sudo systemctl restart systemd-journald` " +
			"(or Storage=persistent in a /etc/systemd/journald.conf.d/ drop-in), and keep SplitMode=uid",
	},
	{
		Name: "cgroup",
		Run:  checkCgroup,
		Fix:  "run a kernel and systemd with cgroup v2 (Linux 5.14 or later; systemd.unified_cgroup_hierarchy=1)",
	},
	{
		Name: "engine-confinement",
		Run:  checkConfinement,
		Fix: "allow unprivileged user namespaces (Ubuntu: sysctl kernel.apparmor_restrict_unprivileged_userns=0 or an AppArmor profile " +
			"for the engine; elsewhere user.max_user_namespaces > 0, kernel.unprivileged_userns_clone=1); until then every stop ends uncertain",
	},
	{
		Name: "yama",
		Run:  checkYama,
		Fix:  yamaFix,
	},
	{
		Name: "engine-pins",
		Run:  checkPins,
		Fix:  "check that the engine change is yours, then re-pin the conversation with `mosaicctl conv add ... --replace`",
	},
	{
		Name: "env-files",
		Run:  checkEnvFiles,
		Fix:  "keep each Claude env file readable (mode 0600, no link on its path) under ~/.config/mosaic (such as ~/.config/mosaic/keys)",
	},
	{
		Name: "units",
		Run:  checkUnits,
		Fix:  "`mosaicctl install` (or `sudo mosaicctl install --global`, or install the mosaic package)",
	},
	{
		Name: "idle-policy",
		Run:  checkIdlePolicy,
		Fix:  "`mosaicctl conv add ... --idle-stop DURATION --replace` sets a conversation's idle policy",
	},
}

func doctorCommand() *cli.Command {
	return &cli.Command{
		Name:  "doctor",
		Usage: "check that this machine gives mosaic what it needs, one line per check with a fix",
		Description: "Each check prints ok, warn or FAIL with what it found and, when not ok, the fix. A warning is\n" +
			"something mosaic works without but you should know; a failure is a promise mosaic cannot keep\n" +
			"here. Exit status 0 when nothing failed, 1 otherwise. --json prints the same as one object.",
		Flags: []cli.Flag{
			&cli.BoolFlag{Name: "json", Usage: "print the results as JSON"},
		},
		Action: func(c *cli.Context) error {
			if c.Args().Present() {
				return usageError("doctor takes no arguments, got %q: it runs every check (%s)", c.Args().Slice(), checkNames())
			}
			rs := runChecks(c.Context, checks)
			var err error
			if c.Bool("json") {
				err = printResultsJSON(os.Stdout, rs)
			} else {
				printResults(os.Stdout, rs)
			}
			if err != nil {
				return err
			}
			if failed := count(rs, verdictFail); failed > 0 {
				return fmt.Errorf("%d of %d checks failed", failed, len(rs))
			}
			return nil
		},
	}
}

// checkNames lists the checks, in order.
func checkNames() string {
	names := make([]string, len(checks))
	for i, ck := range checks {
		names[i] = ck.Name
	}
	return strings.Join(names, ", ")
}

// checkResult is one check's outcome.
type checkResult struct {
	Name    string `json:"name"`
	Verdict string `json:"verdict"`
	// Detail is what the check found (ok) or what is wrong.
	Detail string `json:"detail"`
	Fix    string `json:"fix,omitempty"`
}

// checkTimeout bounds one check: a hung bus or a huge engine tree makes
// that check fail, not doctor hang.
const checkTimeout = 30 * time.Second

// runChecks runs every check in order.
func runChecks(ctx context.Context, cs []check) []checkResult {
	rs := make([]checkResult, 0, len(cs))
	for _, ck := range cs {
		cctx, cancel := context.WithTimeout(ctx, checkTimeout)
		found, err := ck.Run(cctx)
		cancel()
		rs = append(rs, judge(ck, found, err))
	}
	return rs
}

func judge(ck check, found string, err error) checkResult {
	if err == nil {
		return checkResult{Name: ck.Name, Verdict: verdictOK, Detail: found}
	}
	r := checkResult{Name: ck.Name, Verdict: verdictFail, Detail: err.Error(), Fix: ck.Fix}
	var f *finding
	if errors.As(err, &f) {
		r.Verdict = f.verdict
		if f.fix != "" {
			r.Fix = f.fix
		}
	}
	return r
}

// printResults prints one line per check: its verdict, its name, what it
// found or what is wrong, and the fix.
func printResults(w io.Writer, rs []checkResult) {
	for _, r := range rs {
		switch r.Verdict {
		case verdictOK:
			fmt.Fprintf(w, "ok    %-20s %s\n", r.Name, r.Detail)
		case verdictWarn:
			fmt.Fprintf(w, "warn  %-20s %s; fix: %s\n", r.Name, r.Detail, r.Fix)
		default:
			fmt.Fprintf(w, "FAIL  %-20s %s; fix: %s\n", r.Name, r.Detail, r.Fix)
		}
	}
}

func printResultsJSON(w io.Writer, rs []checkResult) error {
	out := struct {
		Checks   []checkResult `json:"checks"`
		Failed   int           `json:"failed"`
		Warnings int           `json:"warnings"`
	}{rs, count(rs, verdictFail), count(rs, verdictWarn)}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(out)
}

func count(rs []checkResult, verdict string) int {
	n := 0
	for _, r := range rs {
		if r.Verdict == verdict {
			n++
		}
	}
	return n
}
