package main

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/mosaic-agents/mosaic/contrib/sandboxtest"
)

func TestRunChecksOneLinePerCheck(t *testing.T) {
	cs := []check{
		{Name: "passes", Run: func(context.Context) (string, error) { return "all good", nil }, Fix: "none"},
		{Name: "fails", Run: func(context.Context) (string, error) { return "", errors.New("it broke") }, Fix: "mend it"},
	}
	var out bytes.Buffer
	if failed := runChecks(context.Background(), &out, cs); failed != 1 {
		t.Fatalf("%d failed, want 1", failed)
	}
	want := "ok    passes               all good\nFAIL  fails                it broke; fix: mend it\n"
	if out.String() != want {
		t.Fatalf("output\n%q\nwant\n%q", out.String(), want)
	}
}

// TestDoctorConfinement: on the sandbox confinement is available and
// doctor says so with exit 0; where a user namespace cannot be made (an
// ancestor's user.max_user_namespaces is used up) it fails with the fix and
// exit 1.
func TestDoctorConfinement(t *testing.T) {
	sandboxtest.Require(t)
	bin := sandboxtest.Bin(t, "mosaicctl")
	r := run(t, bin, "doctor")
	if r.code != 0 || !strings.Contains(r.stdout, "ok    engine-confinement") || !strings.Contains(r.stdout, "cgroup") {
		t.Fatalf("doctor: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	// Root of a user namespace of its own limits it to one namespace below
	// and uses it up running doctor as an ordinary uid there: the probe's
	// clone(CLONE_NEWUSER) fails with ENOSPC.
	r = run(t, "unshare", "--user", "--map-root-user", "sh", "-c",
		`echo 1 > /proc/sys/user/max_user_namespaces && exec unshare --user --map-user=1000 --map-group=1000 "$0" doctor`, bin)
	if r.code != 1 || !strings.Contains(r.stdout, "FAIL  engine-confinement") || !strings.Contains(r.stdout, "fix: allow unprivileged user namespaces") {
		t.Fatalf("doctor without user namespaces: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}
