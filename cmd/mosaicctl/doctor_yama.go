package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"
)

// Where the kernel says whether Yama runs and how strictly; variables so
// that tests can point them elsewhere.
var (
	// yamaScopeFile is Yama's ptrace_scope; a kernel without Yama has none.
	yamaScopeFile = "/proc/sys/kernel/yama/ptrace_scope"
	// lsmFile lists the kernel's active security modules (securityfs,
	// often unmounted or unreadable).
	lsmFile = "/sys/kernel/security/lsm"
)

// yamaFix sets ptrace_scope now and at every boot.
const yamaFix = "`sudo sysctl kernel.yama.ptrace_scope=1`, and at every boot: " +
	"`echo kernel.yama.ptrace_scope=1 | sudo tee /etc/sysctl.d/10-ptrace.conf`"

// yamaAbsentFix: Yama must be built in and enabled before it can be set.
const yamaAbsentFix = "run a kernel with Yama (CONFIG_SECURITY_YAMA=y, and `yama` in the lsm= boot parameter where one is given), then " + yamaFix

// yamaScopes says what each ptrace_scope Yama accepts allows.
var yamaScopes = map[string]string{
	"1": "restricted: only to an ancestor",
	"2": "admin-only: only with CAP_SYS_PTRACE",
	"3": "no attach at all",
}

// checkYama: an engine's stdio is pipes and sockets the controller holds
// one end of (scopes/stdio.go); what keeps a tool, the engine's
// descendant of the same uid, from taking the engine's ends
// (pidfd_getfd(2)), ptracing it or writing /proc/<engine>/mem is Yama's
// ptrace_scope 1 or more. Without it the tool can write what the
// controller reads as the engine's (docs/security.md, "Without Yama").
func checkYama(ctx context.Context) (string, error) {
	return judgeYama(yamaScopeFile, lsmFile)
}

// judgeYama decides the yama check from the ptrace_scope file and the
// list of active security modules.
func judgeYama(scopeFile, lsmFile string) (string, error) {
	const attach = "a tool of the engine's uid can attach to its engine (pidfd_getfd(2), ptrace, /proc/<engine>/mem) " +
		"and write what the controller reads as the engine's; mosaic's own checks (peer identity, dialogs answered " +
		"only with the engine's choices, proofs from the cgroup) still stand"
	b, err := os.ReadFile(scopeFile)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		lsms, lerr := os.ReadFile(lsmFile)
		list := strings.TrimSpace(string(lsms))
		switch {
		case lerr != nil:
			return "", warnf(yamaAbsentFix, "no Yama in this kernel (no %s): %s", scopeFile, attach)
		case hasLSM(list, "yama"):
			return "", warnf("check that /proc is this kernel's own (not a container's masked copy): `cat "+scopeFile+"`",
				"%s lists yama, but there is no %s: %s", lsmFile, scopeFile, attach)
		}
		return "", warnf(yamaAbsentFix, "no Yama in this kernel (no %s; its security modules, %s: %s): %s", scopeFile, lsmFile, list, attach)
	case err != nil:
		return "", warnf("check that /proc is mounted and `cat "+scopeFile+"` reads a number",
			"cannot read Yama's ptrace_scope (%v), so cannot tell whether a tool can attach to its engine", err)
	}
	v := strings.TrimSpace(string(b))
	if v == "0" {
		return "", warnf("", "kernel.yama.ptrace_scope=0 (classic: any process of the same uid may attach): %s", attach)
	}
	if what, ok := yamaScopes[v]; ok {
		return fmt.Sprintf("kernel.yama.ptrace_scope=%s (%s): a tool cannot attach to its engine, its ancestor", v, what), nil
	}
	return "", warnf("", "%s reads %q, not a ptrace_scope Yama knows (0 to 3), so cannot tell whether a tool can attach to its engine", scopeFile, v)
}

// hasLSM says whether the comma-separated list of security modules names lsm.
func hasLSM(list, lsm string) bool {
	for _, m := range strings.Split(list, ",") {
		if strings.TrimSpace(m) == lsm {
			return true
		}
	}
	return false
}
