package web_test

import (
	"errors"
	"net"
	"net/http"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mosaic-agents/mosaic/contrib/sandboxtest"
	"github.com/mosaic-agents/mosaic/protocol"
)

// TestWebUnits: the installed units on the sandbox's real user manager.
// `mosaicctl web` starts mosaic-web.socket and prints a link to its port;
// the first request socket-activates `mosaicctl web serve`, which answers
// the login; `web sessions` lists the session and `web revoke all` ends it.
func TestWebUnits(t *testing.T) {
	sandboxtest.Require(t)
	bin := sandboxtest.Bin(t, "mosaicctl")
	sh := func(name string, args ...string) string {
		t.Helper()
		out, err := exec.Command(name, args...).CombinedOutput()
		if err != nil {
			t.Fatalf("%s %v: %v\n%s", name, args, err, out)
		}
		return string(out)
	}
	sh(bin, "install")
	t.Cleanup(func() {
		exec.Command("systemctl", "--user", "stop", "mosaic-web.socket", "mosaic-web.service").Run()
		exec.Command(bin, "uninstall", "--force").Run()
	})
	out, err := exec.Command(bin, "web", "--no-browser").Output()
	if err != nil {
		t.Fatalf("mosaicctl web: %v", err)
	}
	link := strings.TrimSpace(string(out))
	if !strings.HasPrefix(link, "http://127.0.0.1:7433/login?token=") {
		t.Fatalf("mosaicctl web printed %q", link)
	}
	c := browser(t)
	r, err := c.Get(link)
	if err != nil {
		t.Fatal(err)
	}
	r.Body.Close()
	if r.StatusCode != http.StatusSeeOther {
		t.Fatalf("login through the activated socket: %s", r.Status)
	}
	if st := strings.TrimSpace(sh("systemctl", "--user", "is-active", "mosaic-web.service")); st != "active" {
		t.Fatalf("mosaic-web.service is %s after a request", st)
	}
	r, err = c.Get("http://127.0.0.1:7433/")
	if err != nil {
		t.Fatal(err)
	}
	r.Body.Close()
	if r.StatusCode != http.StatusOK {
		t.Fatalf("the list after login: %s", r.Status)
	}
	// localhost's first address is held too: no other process (an
	// agent's tool) can listen there to serve a page under that name, and
	// the server answers there to both names.
	if l, err := net.Listen("tcp6", "[::1]:7433"); err == nil {
		l.Close()
		t.Fatalf("another process could listen on [::1]:7433 beside the web socket")
	} else if !errors.Is(err, syscall.EADDRINUSE) {
		t.Logf("no IPv6 here to listen on: %v", err)
	} else {
		for _, host := range []string{"[::1]:7433", "localhost:7433"} {
			req, _ := http.NewRequest("GET", "http://[::1]:7433/api/conversations", nil)
			req.Host = host
			r, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatalf("GET over ::1 as %s: %v", host, err)
			}
			if code := refusal(t, r); code != protocol.CodeWebAuth {
				t.Fatalf("GET over ::1 as %s, with no session: refused %q, want %q (the server's own answer)", host, code, protocol.CodeWebAuth)
			}
		}
	}
	if list := sh(bin, "web", "sessions"); strings.Count(list, "\n") != 2 || !strings.Contains(list, "Go-http-client") {
		t.Fatalf("web sessions:\n%s", list)
	}
	sh(bin, "web", "revoke", "all")
	r, err = c.Get("http://127.0.0.1:7433/")
	if err != nil {
		t.Fatal(err)
	}
	if code := refusal(t, r); code != protocol.CodeWebAuth {
		t.Fatalf("after revoke: refused %q, want %q", code, protocol.CodeWebAuth)
	}
	// Each refusal is a structured journal entry, as the controller's
	// are: found by its code, not only by its text.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		out, _ := exec.Command("journalctl", "--user", "-u", "mosaic-web.service", "MOSAIC_REFUSAL="+protocol.CodeWebAuth, "-o", "cat", "--no-pager").Output()
		if strings.Contains(string(out), "refused GET /: "+protocol.CodeWebAuth) {
			break
		}
		if time.Now().After(deadline) {
			all, _ := exec.Command("journalctl", "--user", "-u", "mosaic-web.service", "-o", "cat", "--no-pager").Output()
			t.Fatalf("no journal entry with MOSAIC_REFUSAL=%s for the refused GET; the unit's journal:\n%s", protocol.CodeWebAuth, all)
		}
	}
	if out, err := exec.Command(bin, "web", "revoke", "0123456789abcdef").CombinedOutput(); err == nil || !strings.HasPrefix(string(out), "mosaicctl: usage: no such web session") {
		t.Fatalf("revoking an unknown session: %v, %q; want it refused usage", err, out)
	}
	// uninstall stops the web page's units before their files go: left
	// running, they served on from files no longer there.
	if out := sh(bin, "uninstall"); !strings.Contains(out, "stopped mosaic-web.socket") || !strings.Contains(out, "stopped mosaic-web.service") {
		t.Fatalf("uninstall did not say it stopped the web units:\n%s", out)
	}
	for _, u := range []string{"mosaic-web.socket", "mosaic-web.service"} {
		if st, _ := exec.Command("systemctl", "--user", "is-active", u).Output(); strings.TrimSpace(string(st)) != "inactive" {
			t.Errorf("%s is %s after uninstall", u, strings.TrimSpace(string(st)))
		}
	}
	if _, err := http.Get("http://127.0.0.1:7433/"); err == nil {
		t.Errorf("the web port still answers after uninstall")
	}
}
