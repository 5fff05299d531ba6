package scopes

import (
	"errors"
	"fmt"
	"os"
	"path"
	"slices"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/mosaic-agents/mosaic/internal/devices"
)

// devDir is where devices are named.
const devDir = devices.Dir

// devNodes are the only devices in an engine's /dev, each bound from the
// host's node: what programs open by name, none of which reaches
// anything of the user's. /dev/tty opens nothing: the engine has no
// controlling terminal (held.go) until a tool makes a session on a pty
// of its own.
var devNodes = devices.Plain

// devLinks are the links every /dev has (as systemd's PrivateDevices and
// container runtimes make them); privatePTYs links ptmx once its
// instance is mounted.
var devLinks = [][2]string{
	{"fd", "/proc/self/fd"},
	{"stdin", "/proc/self/fd/0"},
	{"stdout", "/proc/self/fd/1"},
	{"stderr", "/proc/self/fd/2"},
}

// privateDev puts a /dev of the engine's own in place of the host's: a
// tmpfs holding devNodes and the devices the conversation gives its tools
// (Spec.Devices), the links, and the directories the engine's own ptys,
// shared memory and queues are mounted on next. It returns the devices
// bound besides devNodes, and the names that held no device.
//
// A device the user may open is no tool's business unless given: the
// console the user is logged in on (/dev/tty<N>, and /dev/vcs*, its
// screen's contents), what logind gives the user at the seat (a
// microphone and a camera under /dev/snd and /dev/video*, a security key
// under /dev/hidraw*, the GPU), the FUSE device (killUnfrozen), anything
// a later udev rule adds. An allow list covers all of them at once; masks
// named devices one by one, and a mask covers a path, not the device.
//
// The nodes are opened (O_PATH) before the tmpfs covers them and bound
// from those descriptors. Each bind is a mount of the host's devtmpfs,
// so it keeps opening the device; the tmpfs itself is nodev, and the
// engine (no CAP_MKNOD outside) could make no node there anyway. It is
// left read-only, so no tool puts a file of its own at a name another
// program trusts.
func privateDev(devices []string) (bound, absent []string, err error) {
	fds := map[string]int{}
	defer func() {
		for _, fd := range fds {
			unix.Close(fd)
		}
	}()
	names := slices.Clone(devNodes)
	for _, d := range devices {
		names = append(names, strings.TrimPrefix(d, devDir+"/"))
	}
	for _, n := range names {
		p := path.Join(devDir, n)
		fd, err := unix.Open(p, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENOTDIR) {
			absent = append(absent, p)
			continue
		}
		if err != nil {
			return nil, nil, fmt.Errorf("open %s: %w", p, err)
		}
		var st unix.Stat_t
		if err := unix.Fstat(fd, &st); err != nil {
			unix.Close(fd)
			return nil, nil, fmt.Errorf("stat %s: %w", p, err)
		}
		// Anything else at the name (a link, a directory, a file a
		// container image put there) is no device to bind: the engine
		// goes without.
		if st.Mode&unix.S_IFMT != unix.S_IFCHR {
			unix.Close(fd)
			absent = append(absent, p)
			continue
		}
		fds[n] = fd
	}
	if err := unix.Mount("mosaic-dev", devDir, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "size=64k,nr_inodes=256,mode=0755"); err != nil {
		return nil, nil, fmt.Errorf("mount a /dev of the engine's own: %w", err)
	}
	for _, n := range names {
		fd, ok := fds[n]
		if !ok {
			continue
		}
		p := path.Join(devDir, n)
		if err := os.MkdirAll(path.Dir(p), 0o755); err != nil {
			return nil, nil, err
		}
		if err := os.WriteFile(p, nil, 0o666); err != nil {
			return nil, nil, err
		}
		if err := unix.Mount(fmt.Sprintf("/proc/self/fd/%d", fd), p, "", unix.MS_BIND, ""); err != nil {
			return nil, nil, fmt.Errorf("bind %s into the engine's /dev: %w", p, err)
		}
		if !slices.Contains(devNodes, n) {
			bound = append(bound, p)
		}
	}
	for _, l := range devLinks {
		if err := os.Symlink(l[1], path.Join(devDir, l[0])); err != nil {
			return nil, nil, err
		}
	}
	for _, d := range []string{devPTS, devShm, devMqueue} {
		if err := os.Mkdir(d, 0o755); err != nil {
			return nil, nil, err
		}
	}
	return bound, absent, nil
}

// devicePaths checks Spec.Devices again at the launch (devices.Check): the
// conversation file may have changed since it was read.
func devicePaths(given []string) ([]string, error) {
	out, err := devices.Check(given)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrConfinement, err)
	}
	return out, nil
}

// sealDev makes the engine's /dev read-only, once the mounts on it are
// made.
func sealDev() error {
	if err := unix.Mount("", devDir, "", unix.MS_REMOUNT|unix.MS_BIND|unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
		return fmt.Errorf("make the engine's /dev read-only: %w", err)
	}
	return nil
}

// devMounts lists every other mount of the devtmpfs (its root mounted
// again: a chroot's /dev that root bound for a build; a node or a
// directory of it bound alone: a container's /dev/fuse), each to be
// masked whole: the engine's own /dev replaces only the one at /dev.
func devMounts(mountinfo string) []string {
	return mountPoints(mountinfo, func(m mountEntry) bool { return m.fstype == "devtmpfs" && m.point != devDir })
}

// fusectlMounts lists every mount of the FUSE control filesystem
// (/sys/fs/fuse/connections, where systemd mounts it), each to be masked
// whole.
func fusectlMounts(mountinfo string) []string {
	return mountPoints(mountinfo, func(m mountEntry) bool { return m.fstype == "fusectl" })
}
