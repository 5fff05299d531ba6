package userbus

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/godbus/dbus/v5"

	"github.com/mosaic-agents/mosaic/contrib/sandboxtest"
)

// fakeUnit is org.freedesktop.systemd1.Manager's RefUnit and UnrefUnit
// as the manager keeps references: per sender's unique name (sd_bus_track,
// recursive), taken when the call is read, answered after delay.
type fakeUnit struct {
	delay time.Duration
	mu    sync.Mutex
	refs  map[string]int
}

func (f *fakeUnit) RefUnit(sender dbus.Sender, unit string) *dbus.Error {
	f.mu.Lock()
	f.refs[string(sender)]++
	f.mu.Unlock()
	time.Sleep(f.delay) // the manager busy: the reference is taken, the answer late
	return nil
}

func (f *fakeUnit) UnrefUnit(sender dbus.Sender, unit string) *dbus.Error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.refs[string(sender)] == 0 {
		return dbus.NewError("org.freedesktop.systemd1.NotReferenced", nil)
	}
	f.refs[string(sender)]--
	return nil
}

// privateBus starts a dbus-daemon of its own on a socket in a temporary
// directory and returns its address.
func privateBus(t *testing.T) string {
	t.Helper()
	daemon, err := exec.LookPath("dbus-daemon")
	if err != nil {
		sandboxtest.Unavailable(t, "no dbus-daemon to run a bus of the test's own: %v", err)
	}
	dir := t.TempDir()
	sock := filepath.Join(dir, "bus")
	conf := filepath.Join(dir, "bus.conf")
	if err := os.WriteFile(conf, []byte(`<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig><type>session</type><listen>unix:path=`+sock+`</listen><auth>EXTERNAL</auth>
<policy context="default"><allow send_destination="*"/><allow receive_sender="*"/><allow own="*"/></policy></busconfig>`), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(daemon, "--config-file="+conf, "--nofork", "--nopidfile")
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	for end := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if _, err := os.Stat(sock); err == nil {
			return "unix:path=" + sock
		}
		if time.Now().After(end) {
			t.Fatal("dbus-daemon never listened")
		}
	}
}

// TestHolderRefAnsweredLateIsLetGo: a RefUnit the manager took
// but answered after the caller stopped waiting fails the Hold, so no
// release is ever returned for it; the reference must still be let go
// (an Unref, or the connection closed, which makes the manager drop every
// reference of the name), or the unit stays loaded for the Holder's life.
func TestHolderRefAnsweredLateIsLetGo(t *testing.T) {
	addr := privateBus(t)
	mgr, err := dbus.Connect(addr)
	if err != nil {
		t.Fatal(err)
	}
	defer mgr.Close()
	unit := &fakeUnit{delay: 300 * time.Millisecond, refs: map[string]int{}}
	if err := mgr.Export(unit, "/org/freedesktop/systemd1", "org.freedesktop.systemd1.Manager"); err != nil {
		t.Fatal(err)
	}
	if r, err := mgr.RequestName("org.freedesktop.systemd1", dbus.NameFlagDoNotQueue); err != nil || r != dbus.RequestNameReplyPrimaryOwner {
		t.Fatalf("own org.freedesktop.systemd1: %v %v", r, err)
	}
	h := NewHolder(addr)
	defer h.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if release, err := h.Hold(ctx, "x.scope"); err == nil {
		release(context.Background())
		t.Fatal("a Ref answered after the caller's deadline succeeded")
	}
	// Outstanding: references still counted for a name still on the bus.
	outstanding := func() map[string]int {
		unit.mu.Lock()
		defer unit.mu.Unlock()
		out := map[string]int{}
		for name, n := range unit.refs {
			if n == 0 {
				continue
			}
			var has bool
			if err := mgr.BusObject().Call("org.freedesktop.DBus.NameHasOwner", 0, name).Store(&has); err == nil && has {
				out[name] = n
			}
		}
		return out
	}
	var left map[string]int
	for end := time.Now().Add(3 * time.Second); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
		if left = outstanding(); len(left) == 0 {
			return
		}
	}
	t.Fatalf("the failed Hold left references %v held by a live connection, with no release for them", left)
}
