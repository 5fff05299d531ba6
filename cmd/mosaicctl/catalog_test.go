package main

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/mosaic-agents/mosaic/contrib/sandboxtest"
	"github.com/mosaic-agents/mosaic/contrib/stubmodel"
)

// catalogHelper is the sandbox's root helper that installs a message
// catalog and rebuilds journalctl's index (contrib/sandbox/inner.sh).
const catalogHelper = "/usr/local/sbin/mosaic-sandbox-catalog"

// TestJournalCatalogExplainsRefusal: a controller refuses a client's
// command; `journalctl --user -x -u mosaic-conv@ID` shows no explanation
// until the package's catalog is installed, then shows its entry for
// refusals with the refusal code and conversation filled in.
func TestJournalCatalogExplainsRefusal(t *testing.T) {
	sandboxtest.Require(t)
	if _, err := os.Stat(catalogHelper); err != nil {
		sandboxtest.Unavailable(t, "no %s in this sandbox: %v", catalogHelper, err)
	}
	bin := sandboxtest.Bin(t, "mosaicctl")
	entry, _ := fakeEngine(t, stubmodel.Script{})
	id, _, path := startConversation(t, bin, "catalog", "--engine", entry, "--provider", "fakellm", "--model", "fake-model")
	refuseOne(t, path)
	args := []string{"--user", "-x", "-q", "--no-pager", "-u", "mosaic-conv@" + id + ".service", "MOSAIC_REFUSAL=unknown-command"}
	journal(t, "-u", "mosaic-conv@"+id+".service", "MOSAIC_REFUSAL=unknown-command")
	before := mustRun(t, "journalctl", args...)
	if strings.Contains(before, "the stable code") {
		t.Fatalf("the explanation shows before the catalog is installed:\n%s", before)
	}

	const catalog = "../../packaging/catalog/mosaic.catalog"
	f, err := os.Open(catalog)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	cmd := exec.Command("sudo", "-n", catalogHelper, "install")
	cmd.Stdin = f
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("install the catalog: %v\n%s", err, out)
	}
	// systemd's own parser took every entry of the file.
	text, err := os.ReadFile(catalog)
	if err != nil {
		t.Fatal(err)
	}
	ids := regexp.MustCompile(`(?m)^-- ([0-9a-f]{32})$`).FindAllStringSubmatch(string(text), -1)
	listed := mustRun(t, "journalctl", "--list-catalog")
	for _, id := range ids {
		if !regexp.MustCompile(`(?m)^` + id[1] + ` mosaic: `).MatchString(listed) {
			t.Errorf("journalctl --list-catalog has no entry %s", id[1])
		}
	}
	if len(ids) < 14 {
		t.Errorf("%d entries in %s", len(ids), catalog)
	}
	after := mustRun(t, "journalctl", args...)
	t.Logf("journalctl -x:\n%s", after)
	for _, want := range []string{
		"Subject: mosaic refused: unknown-command (conversation " + id + ")",
		"Defined-By: mosaic",
		"Documentation: man:mosaicctl(1)",
		"the stable code unknown-command. A refusal changes nothing",
	} {
		if !strings.Contains(after, want) {
			t.Errorf("journalctl -x does not show %q", want)
		}
	}
}

// refuseOne says hello on the conversation's socket and sends a command
// the controller does not know, and waits for the refusal.
func refuseOne(t *testing.T, path string) {
	t.Helper()
	c, err := net.Dial("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(time.Minute))
	fmt.Fprintf(c, "{\"type\":\"hello\",\"protocol\":1,\"client\":\"catalog-test\"}\n{\"type\":\"no-such-command\",\"request\":\"r-1\"}\n")
	sc := bufio.NewScanner(c)
	for sc.Scan() {
		if strings.Contains(sc.Text(), `"record":"refusal"`) {
			return
		}
	}
	t.Fatalf("no refusal from the controller: %v", sc.Err())
}
