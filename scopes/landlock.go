package scopes

import (
	"fmt"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/mosaic-agents/mosaic/proofs"
)

// scopeABI is the first Landlock ABI with scopes (Linux 6.12).
const scopeABI = 6

// scopeAttr is the prefix of struct landlock_ruleset_attr that ends with
// scoped: a kernel with scopes accepts it, and no later field (left zero)
// is sent to one that does not know it.
type scopeAttr struct {
	handledFS, handledNet, scoped uint64
}

// scopes are the Landlock scope bits an engine's domain is created with,
// by the names a report and a proof give them.
var scopes = []struct {
	bit  uint64
	name string
}{
	{unix.LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET, proofs.ScopeAbstractUnix},
	{unix.LANDLOCK_SCOPE_SIGNAL, proofs.ScopeSignal},
}

// scopeDomain puts the calling thread, and so everything forked from it
// after, in a Landlock domain that handles no file or network access but
// scopes abstract Unix sockets and signals: a process inside can connect
// or send only to an abstract socket bound inside the same domain (one
// bound inside is still reachable from outside), and signal only
// processes inside it. The network namespace is shared (the engine calls
// its model), so without the scope every abstract socket of the
// machine's network namespace is reachable, whatever the masks hide: an
// X11 display (@/tmp/.X11-unix/X0 types into the user's terminals), a
// session bus listening at unix:abstract=, which starts processes outside
// the cohort. The signal scope adds to the pid namespace, which names no
// process outside, the threads of the held child other than the one the
// engine is forked from, and a pidfd handed in.
//
// It returns the scopes set, named from the bits the domain was made
// with, or none and why: a kernel without Landlock or without scopes, or
// one that refuses the domain (a seccomp filter, too many nested
// domains). A refusal never fails the confinement, which would leave the
// engine with no namespaces at all: it is reported, never claimed.
// Creating a domain needs no_new_privs or CAP_SYS_ADMIN in the user
// namespace; the held child has the latter until the engine's fork.
func scopeDomain() (scoped []string, why string) {
	abi, why := landlockABI()
	switch {
	case why != "":
		return nil, why
	case abi < scopeABI:
		return nil, fmt.Sprintf("Landlock ABI %d has no scopes (ABI %d, Linux 6.12, has)", abi, scopeABI)
	}
	var attr scopeAttr
	for _, s := range scopes {
		attr.scoped |= s.bit
	}
	fd, _, errno := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, uintptr(unsafe.Pointer(&attr)), unsafe.Sizeof(attr), 0)
	if errno != 0 {
		return nil, fmt.Sprintf("landlock_create_ruleset(scoped %#x): %v", attr.scoped, errno)
	}
	defer unix.Close(int(fd))
	if _, _, errno := unix.Syscall(unix.SYS_LANDLOCK_RESTRICT_SELF, fd, 0, 0); errno != 0 {
		return nil, fmt.Sprintf("landlock_restrict_self: %v", errno)
	}
	for _, s := range scopes {
		if attr.scoped&s.bit != 0 {
			scoped = append(scoped, s.name)
		}
	}
	return scoped, ""
}

// landlockABI is the kernel's Landlock ABI version, or why it has none.
func landlockABI() (int, string) {
	abi, _, errno := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, 0, 0, unix.LANDLOCK_CREATE_RULESET_VERSION)
	switch {
	case errno == unix.ENOSYS:
		return 0, "the kernel has no Landlock (Linux 5.13 or later, and CONFIG_SECURITY_LANDLOCK)"
	case errno == unix.EOPNOTSUPP:
		return 0, "Landlock is not enabled at boot (add landlock to the lsm= kernel parameter)"
	case errno != 0:
		return 0, fmt.Sprintf("landlock_create_ruleset(version): %v", errno)
	}
	return int(abi), ""
}
