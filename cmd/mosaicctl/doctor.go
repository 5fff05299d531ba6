package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/mosaic-agents/mosaic/scopes"
	"github.com/urfave/cli/v2"
)

// check is one thing doctor looks at: it returns what it found, or an
// error saying what is wrong; Fix says what to do about a failure.
type check struct {
	Name string
	Run  func(ctx context.Context) (string, error)
	Fix  string
}

// checks is doctor's list, in the order printed.
var checks = []check{
	{
		Name: "engine-confinement",
		Run:  checkConfinement,
		Fix: "allow unprivileged user namespaces (Ubuntu: sysctl kernel.apparmor_restrict_unprivileged_userns=0 or an AppArmor profile " +
			"for the engine; elsewhere user.max_user_namespaces > 0, kernel.unprivileged_userns_clone=1); until then every stop ends uncertain",
	},
}

// checkConfinement sets up an engine's confinement in a throwaway child,
// exactly as a launch does.
func checkConfinement(ctx context.Context) (string, error) {
	c, err := scopes.ProbeConfinement(ctx)
	if err != nil {
		return "", err
	}
	var ns []string
	for _, n := range c.Namespaces {
		ns = append(ns, n.Type)
	}
	return fmt.Sprintf("engines run in their own %s namespaces; masked %s", strings.Join(ns, ", "), strings.Join(c.Masked, " ")), nil
}

func doctorCommand() *cli.Command {
	return &cli.Command{
		Name:  "doctor",
		Usage: "check that this machine gives mosaic what it needs, one line per check with a fix",
		Action: func(c *cli.Context) error {
			if failed := runChecks(c.Context, os.Stdout, checks); failed > 0 {
				return fmt.Errorf("%d of %d checks failed", failed, len(checks))
			}
			return nil
		},
	}
}

// runChecks prints one line per check ("ok" or "FAIL", then what it found
// or what is wrong and the fix) and returns how many failed.
func runChecks(ctx context.Context, w io.Writer, cs []check) int {
	failed := 0
	for _, ck := range cs {
		cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		found, err := ck.Run(cctx)
		cancel()
		if err != nil {
			failed++
			fmt.Fprintf(w, "FAIL  %-20s %v; fix: %s\n", ck.Name, err, ck.Fix)
			continue
		}
		fmt.Fprintf(w, "ok    %-20s %s\n", ck.Name, found)
	}
	return failed
}
