package activation

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/mosaic-agents/mosaic/contrib/sandboxtest"
)

// TestEngineDescriptorsReadBounded (sandbox): a tool whose processes hold
// tens of thousands of descriptors makes a judgement of a socket made
// outside the engines read no more than engineFds of them, and the
// socket's holder outside is still found.
func TestEngineDescriptorsReadBounded(t *testing.T) {
	sandboxtest.Require(t)
	const procs, each = 3, 12000 // under the sandbox's hard limit, 20000
	ready := filepath.Join(t.TempDir(), "ready")
	if err := os.Chmod(filepath.Dir(ready), 0o777); err != nil {
		t.Fatal(err)
	}
	// Each process raises its soft descriptor limit and opens /dev/null
	// until it holds each descriptors, then says so and sleeps.
	hold := fmt.Sprintf(`ulimit -Sn $(ulimit -Hn) || exit 1; for ((i = 0; i < %d; i++)); do exec {fd}</dev/null || exit 1; done; touch %s.$BASHPID; sleep 600`,
		each, ready)
	sandboxtest.Scope(t, fmt.Sprintf("%sfds-%d", EngineScopePrefix, os.Getpid()), nil,
		fmt.Sprintf(`for ((p = 0; p < %d; p++)); do (%s) & done; wait`, procs, hold))
	for deadline := time.Now().Add(60 * time.Second); ; {
		if m, _ := filepath.Glob(ready + ".*"); len(m) == procs {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the tool's processes did not open their descriptors")
		}
		time.Sleep(50 * time.Millisecond)
	}
	l, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	c, err := net.Dial("tcp4", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	f, err := c.(*net.TCPConn).File()
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var st syscall.Stat_t
	if err := syscall.Fstat(int(f.Fd()), &st); err != nil {
		t.Fatal(err)
	}
	var holders []int
	read, err := eachHolder(st.Ino, func(pid int) bool { holders = append(holders, pid); return true })
	if err != nil {
		t.Fatal(err)
	}
	if read != engineFds {
		t.Errorf("read %d descriptors of the tool's %d, want %d (engineFds)", read, procs*each, engineFds)
	}
	if len(holders) != 1 || holders[0] != os.Getpid() {
		t.Errorf("holders %v, want this process (%d) alone", holders, os.Getpid())
	}
}
