package userbus

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	sddbus "github.com/coreos/go-systemd/v22/dbus"
	"github.com/godbus/dbus/v5"

	"github.com/mosaic-agents/mosaic/contrib/sandboxtest"
)

// TestAddress: an explicit address wins, then DBUS_SESSION_BUS_ADDRESS,
// then $XDG_RUNTIME_DIR/bus; with neither, ErrNoUserManager with the hint.
func TestAddress(t *testing.T) {
	for _, tc := range []struct {
		name, addr, session, runtime, want string
	}{
		{"explicit", "unix:path=/x", "unix:path=/s", "/run/user/7", "unix:path=/x"},
		{"session", "", "unix:path=/s", "/run/user/7", "unix:path=/s"},
		{"runtime", "", "", "/run/user/7", "unix:path=/run/user/7/bus"},
		{"neither", "", "", "", ""},
		{"relative runtime", "", "", "run/user/7", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("DBUS_SESSION_BUS_ADDRESS", tc.session)
			t.Setenv("XDG_RUNTIME_DIR", tc.runtime)
			got, err := New(tc.addr).address()
			if tc.want == "" {
				if !errors.Is(err, ErrNoUserManager) || !strings.Contains(err.Error(), "dbus-user-session") {
					t.Fatalf("address = %q, %v; want ErrNoUserManager with the hint", got, err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("address = %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}

// TestNoBus: a bus that does not answer is ErrNoUserManager with the hint,
// op never runs, and the next call dials again (nothing is cached).
func TestNoBus(t *testing.T) {
	b := New("unix:path=" + filepath.Join(t.TempDir(), "no-bus"))
	for i := range 2 {
		ran := false
		err := b.Do(context.Background(), func(*sddbus.Conn) error { ran = true; return nil })
		if !errors.Is(err, ErrNoUserManager) || !strings.Contains(err.Error(), "loginctl enable-linger") || ran {
			t.Fatalf("Do #%d = %v (op ran: %v); want ErrNoUserManager with the hint", i, err, ran)
		}
	}
	if a, b := Default(), Default(); a != b {
		t.Fatal("Default made two connections")
	}
}

// TestSilentBus: a socket that accepts and never answers (a stuck
// manager, or someone else's listener at the address), or a bus that
// authenticates and answers Hello and then nothing (go-systemd's
// NewConnection then waits for its AddMatch), fails the dial with
// ErrNoUserManager once the answer timeout passes, instead of holding the
// Bus, and every caller waiting on its lock, for ever.
func TestSilentBus(t *testing.T) {
	for _, tc := range []struct {
		name  string
		hello bool // authenticate and answer Hello, then nothing
	}{
		{"silent from the start", false},
		{"silent after Hello", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "silent")
			ln, err := net.Listen("unix", path)
			if err != nil {
				t.Fatal(err)
			}
			var mu sync.Mutex
			var conns []net.Conn
			t.Cleanup(func() {
				ln.Close()
				mu.Lock()
				defer mu.Unlock()
				for _, c := range conns {
					c.Close()
				}
			})
			go func() {
				for {
					c, err := ln.Accept()
					if err != nil {
						return
					}
					mu.Lock()
					conns = append(conns, c)
					mu.Unlock()
					if tc.hello {
						go answerHelloOnly(c)
					}
				}
			}()
			b := New("unix:path=" + path)
			b.timeout = 200 * time.Millisecond
			done := make(chan error, 1)
			go func() { done <- b.Do(context.Background(), func(*sddbus.Conn) error { return nil }) }()
			select {
			case err := <-done:
				if !errors.Is(err, ErrNoUserManager) || !strings.Contains(err.Error(), "did not answer") {
					t.Fatalf("Do on a silent bus = %v; want ErrNoUserManager saying it did not answer", err)
				}
			case <-time.After(20 * time.Second):
				t.Fatal("Do on a silent bus still waits after 20 s")
			}
		})
	}
}

// answerHelloOnly plays a bus that takes EXTERNAL authentication and
// answers Hello, and then reads every message and answers none.
func answerHelloOnly(c net.Conn) {
	r := bufio.NewReader(c)
	if _, err := r.ReadByte(); err != nil { // the credentials byte
		return
	}
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			return
		}
		switch {
		case line == "AUTH\r\n":
			_, err = io.WriteString(c, "REJECTED EXTERNAL\r\n")
		case strings.HasPrefix(line, "AUTH EXTERNAL"):
			_, err = io.WriteString(c, "OK 0123456789abcdef0123456789abcdef\r\n")
		case strings.HasPrefix(line, "NEGOTIATE_UNIX_FD"):
			_, err = io.WriteString(c, "AGREE_UNIX_FD\r\n")
		case strings.HasPrefix(line, "BEGIN"):
			for {
				m, err := dbus.DecodeMessage(r)
				if err != nil {
					return
				}
				if member, _ := m.Headers[dbus.FieldMember].Value().(string); member != "Hello" {
					continue
				}
				reply := &dbus.Message{Type: dbus.TypeMethodReply, Headers: map[dbus.HeaderField]dbus.Variant{
					dbus.FieldReplySerial: dbus.MakeVariant(m.Serial()),
					dbus.FieldSignature:   dbus.MakeVariant(dbus.SignatureOf("")),
				}, Body: []any{":1.1"}}
				if reply.EncodeTo(c, binary.LittleEndian) != nil {
					return
				}
			}
		default:
			_, err = io.WriteString(c, "ERROR\r\n")
		}
		if err != nil {
			return
		}
	}
}

// TestRedial: one connection serves every call; after it is closed under
// the Bus (the user manager restarted), the next call redials once and
// succeeds.
func TestRedial(t *testing.T) {
	sandboxtest.Require(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	b := New("")
	t.Cleanup(b.Close)
	version := func() error {
		return b.Do(ctx, func(c *sddbus.Conn) error {
			_, err := c.GetManagerProperty("Version")
			return err
		})
	}
	if err := version(); err != nil {
		t.Fatal(err)
	}
	first, err := b.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if again, _ := b.Conn(ctx); again != first {
		t.Fatal("a second call dialled a second connection")
	}
	first.Close()
	if err := version(); err != nil {
		t.Fatalf("call after the connection closed: %v", err)
	}
	if second, _ := b.Conn(ctx); second == first {
		t.Fatal("the closed connection was kept")
	}
	b.Close()
	if err := version(); err != nil {
		t.Fatalf("call after Close: %v", err)
	}
}

// TestPrivateSocketFirst: without an explicit address the manager is
// reached on its private socket, so a user bus that does not answer is
// not needed; with an explicit address only that address is tried.
func TestPrivateSocketFirst(t *testing.T) {
	sandboxtest.Require(t)
	t.Setenv("DBUS_SESSION_BUS_ADDRESS", "unix:path="+filepath.Join(t.TempDir(), "no-bus"))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	version := func(b *Bus) error {
		defer b.Close()
		return b.Do(ctx, func(c *sddbus.Conn) error {
			_, err := c.GetManagerProperty("Version")
			return err
		})
	}
	if err := version(New("")); err != nil {
		t.Fatalf("default connection with the user bus gone: %v", err)
	}
	if err := version(New(os.Getenv("DBUS_SESSION_BUS_ADDRESS"))); !errors.Is(err, ErrNoUserManager) {
		t.Fatalf("explicit address that does not answer = %v, want ErrNoUserManager", err)
	}
}
