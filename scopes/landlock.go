package scopes

import (
	"errors"
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

// scopeDomain puts the calling thread, and so everything forked from it
// after, in a Landlock domain that handles no file or network access but
// scopes abstract Unix sockets and signals: a process inside can connect
// only to an abstract socket bound inside the same domain, and signal only
// processes inside it. The network namespace is shared (the engine calls
// its model), so without the scope every abstract socket of the machine's
// network namespace is reachable, whatever the masks hide: an X11 display
// (@/tmp/.X11-unix/X0 types into the user's terminals), a session bus
// listening at unix:abstract=, which starts processes outside the cohort.
// The signal scope adds to the pid namespace, which names no process
// outside, the signals that do not go by pid (a pidfd or an F_SETOWN
// owner handed in).
//
// It returns the scopes set, or none and why when the kernel has no
// Landlock or no scopes in it (what was not set is reported, never
// claimed). A kernel that has them and refuses the domain is an error:
// the engine must not run with less than its report says. Creating a
// domain needs no_new_privs or CAP_SYS_ADMIN in the user namespace; the
// held child has the latter until the engine's fork.
func scopeDomain() (scoped []string, why string, err error) {
	abi, _, errno := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, 0, 0, unix.LANDLOCK_CREATE_RULESET_VERSION)
	switch {
	case errors.Is(errno, unix.ENOSYS):
		return nil, "the kernel has no Landlock (Linux 5.13 or later, and CONFIG_SECURITY_LANDLOCK)", nil
	case errors.Is(errno, unix.EOPNOTSUPP):
		return nil, "Landlock is not enabled at boot (add landlock to the lsm= kernel parameter)", nil
	case errno != 0:
		return nil, "", fmt.Errorf("landlock_create_ruleset(version): %w", errno)
	case abi < scopeABI:
		return nil, fmt.Sprintf("Landlock ABI %d has no scopes (ABI %d, Linux 6.12, has)", abi, scopeABI), nil
	}
	attr := scopeAttr{scoped: unix.LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET | unix.LANDLOCK_SCOPE_SIGNAL}
	fd, _, errno := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, uintptr(unsafe.Pointer(&attr)), unsafe.Sizeof(attr), 0)
	if errno != 0 {
		return nil, "", fmt.Errorf("landlock_create_ruleset(scoped %#x): %w", attr.scoped, errno)
	}
	defer unix.Close(int(fd))
	if _, _, errno := unix.Syscall(unix.SYS_LANDLOCK_RESTRICT_SELF, fd, 0, 0); errno != 0 {
		return nil, "", fmt.Errorf("landlock_restrict_self: %w", errno)
	}
	return []string{proofs.ScopeAbstractUnix, proofs.ScopeSignal}, "", nil
}
