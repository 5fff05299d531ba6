package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	sdjournal "github.com/coreos/go-systemd/v22/journal"
	"github.com/mosaic-agents/mosaic/audit"
	"github.com/mosaic-agents/mosaic/contrib/sandboxtest"
	"github.com/mosaic-agents/mosaic/contrib/stubmodel"
	"github.com/mosaic-agents/mosaic/protocol"
)

// floodRefusals connects as a client would, says hello and sends n bad
// commands (and one whose type is 1 MiB less a little), reading every
// refusal back so the controller never drops the connection as slow.
func floodRefusals(t *testing.T, path string, n int) {
	t.Helper()
	c, err := net.Dial("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Minute))
	refused := make(chan int, 1)
	go func() {
		sc := bufio.NewScanner(c)
		sc.Buffer(make([]byte, 64<<10), 4<<20)
		got := 0
		for got < n+1 && sc.Scan() {
			if strings.Contains(sc.Text(), `"record":"refusal"`) {
				got++
			}
		}
		refused <- got
	}()
	w := bufio.NewWriter(c)
	fmt.Fprintf(w, "{\"type\":\"hello\",\"protocol\":1,\"client\":%q}\n", strings.Repeat("c", 100<<10))
	for i := range n {
		fmt.Fprintf(w, "{\"type\":\"no-such-command\",\"request\":\"r-%d\"}\n", i)
	}
	fmt.Fprintf(w, "{\"type\":%q,\"request\":\"big\"}\n", strings.Repeat("T", (1<<20)-100))
	if err := w.Flush(); err != nil {
		t.Fatalf("flood: %v", err)
	}
	if got := <-refused; got != n+1 {
		t.Fatalf("the flood got %d refusals back; want %d", got, n+1)
	}
}

// conversationJournal is every entry the conversation's controller wrote.
func conversationJournal(t *testing.T, id string) []map[string]any {
	t.Helper()
	return journal(t, "_SYSTEMD_USER_UNIT=mosaic-conv@"+id+".service", "MOSAIC_CONVERSATION="+id)
}

// TestAuditSurvivesRefusalFlood: under a journald rate limit smaller than
// the flood, 20,000 refusals from one connection and then a takeover and a
// force stop with proof: the decisions and the proof are in the journal
// and `audit` finds the proof in the claim store and the journal; the
// refusals are a few counted entries accounting for all 20,000; no field
// is longer than its bound. --proof refuses a symlink before stopping
// anything and replaces an existing file without writing through it.
func TestAuditSurvivesRefusalFlood(t *testing.T) {
	sandboxtest.Require(t)
	bin := sandboxtest.Bin(t, "mosaicctl")
	entry, _ := fakeEngine(t, stubmodel.Script{})
	id, _, path := startConversation(t, bin, "flood", "--engine", entry, "--provider", "fakellm", "--model", "fake-model")
	// journald scales the burst by up to 6 with free space: 1000 becomes
	// at most 6,000 per 30 s, a third of the flood.
	sandboxtest.JournalRateLimit(t, "30s", 1000)

	const n = 20000
	floodRefusals(t, path, n)

	dir := t.TempDir()
	victim, link := filepath.Join(dir, "victim"), filepath.Join(dir, "link.json")
	must(t, os.WriteFile(victim, []byte("keep"), 0o600))
	must(t, os.Symlink(victim, link))
	r := run(t, bin, "stop", "--take", "--yes", "--proof", link, id)
	wantRefusal(t, r, protocol.CodeProofFileSymlink)
	if b, _ := os.ReadFile(victim); string(b) != "keep" {
		t.Fatalf("stop --proof wrote through the symlink: the target now holds %q", b)
	}
	if st := readStatus(t, bin, id); st.Scope == nil || st.Scope.ActiveState != "active" {
		t.Fatalf("a stop refused for its --proof file stopped the engine: %+v", st.Scope)
	}

	proof, other := filepath.Join(dir, "proof.json"), filepath.Join(dir, "other-name")
	must(t, os.WriteFile(proof, []byte("old"), 0o644))
	must(t, os.Link(proof, other))
	if r := run(t, bin, "stop", "--take", "--yes", "--proof", proof, id); r.code != 0 {
		t.Fatalf("stop --take --yes --proof after the flood: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	if b, _ := os.ReadFile(other); string(b) != "old" {
		t.Errorf("the proof was written through a hard link of FILE: it now holds %.40q", b)
	}
	if fi, err := os.Stat(proof); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("the proof file: %v, mode %v; want 0600", err, fi.Mode())
	}
	mustRun(t, bin, "proof", "verify", proof)
	var digest struct{ Digest string }
	b, _ := os.ReadFile(proof)
	must(t, json.Unmarshal(b, &digest))

	var entries []map[string]any
	waitFor(t, func() bool {
		entries = conversationJournal(t, id)
		return hasEntry(entries, "MOSAIC_PROOF_DIGEST", digest.Digest) && hasEntry(entries, "MOSAIC_EVENT", "proof")
	})
	for _, want := range []struct{ field, value string }{
		{"MOSAIC_EVENT", "takeover"}, {"MOSAIC_STATE", "fenced"}, {"MOSAIC_STATE", "stopping"}, {"MOSAIC_STATE", "stopped"},
	} {
		if !hasEntry(entries, want.field, want.value) {
			t.Errorf("no entry with %s=%s after the flood", want.field, want.value)
		}
	}
	refusals, accounted := 0, 0
	for _, e := range entries {
		for k, v := range e {
			s := str(v)
			max := audit.MaxField
			switch k {
			case "MESSAGE":
				max = audit.MaxMessage
			case "MOSAIC_PROOF":
				max = audit.MaxProof
			}
			if strings.HasPrefix(k, "MOSAIC_") || k == "MESSAGE" {
				if len(s) > max {
					t.Errorf("%s of a %s entry is %d bytes; the bound is %d", k, str(e["MOSAIC_EVENT"]), len(s), max)
				}
			}
		}
		if str(e["MOSAIC_EVENT"]) != "refusal" || str(e["MOSAIC_REFUSAL"]) != "unknown-command" {
			continue
		}
		refusals++
		c := 1
		if s := str(e["MOSAIC_COUNT"]); s != "" {
			c, _ = strconv.Atoi(s)
		}
		accounted += c
	}
	t.Logf("%d entries of the controller in all; %d refusal entries account for %d refusals", len(entries), refusals, accounted)
	if refusals > 100 || accounted != n+1 {
		t.Errorf("%d refusal entries accounting for %d refusals; want a few counted entries accounting for all %d", refusals, accounted, n+1)
	}

	r = run(t, bin, "audit", id)
	if r.code != 0 || !strings.Contains(r.stdout, "stored proof "+digest.Digest) || !strings.Contains(r.stdout, "in the journal, verified") ||
		!strings.Contains(r.stdout, "1 proofs in the claim store, 0 missing") {
		t.Fatalf("audit after the flood: exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}

	// Removed, the conversation's history stays in the journal and the
	// claim store, and its audit still proves the stop, with a note.
	mustRun(t, "systemctl", "--user", "stop", "mosaic-conv@"+id+".socket", "mosaic-conv@"+id+".service")
	mustRun(t, bin, "conv", "rm", id)
	r = run(t, bin, "audit", id)
	if r.code != 0 || !strings.Contains(r.stdout, "1 proofs in the claim store, 0 missing") || !strings.Contains(r.stderr, id+" is not registered") {
		t.Fatalf("audit of the removed conversation: exit %d\nstdout:\n%s\nstderr:\n%s\nwant its stop proven, with a note", r.code, r.stdout, r.stderr)
	}
}

// TestAuditReportsSuppression: another process of the user (the test
// itself, in the same journald bucket as every unit of the user manager)
// floods the journal while the conversation is force stopped, so journald
// drops the stop's decisions and proof. `audit` must say so: the proof in
// the claim store is missing from the journal, and journald suppressed
// messages; it exits 4 audit-gap instead of a clean "0 proofs".
func TestAuditReportsSuppression(t *testing.T) {
	env := sandboxtest.Require(t)
	bin := sandboxtest.Bin(t, "mosaicctl")
	entry, _ := fakeEngine(t, stubmodel.Script{})
	id, _, _ := startConversation(t, bin, "suppressed", "--engine", entry, "--provider", "fakellm", "--model", "fake-model")
	if r := run(t, bin, "hello", id); r.code != 0 { // the controller runs, the engine is launched
		t.Fatalf("hello: exit %d %s", r.code, r.stderr)
	}
	if r := run(t, bin, "audit", id); r.code != 0 || !strings.Contains(r.stdout, "0 proofs in the claim store, 0 missing") {
		t.Fatalf("audit before anything happened: exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	const interval = 5 * time.Second
	sandboxtest.JournalRateLimit(t, "5s", 10)

	ctx, cancel := context.WithCancel(context.Background())
	var sent atomic.Int64
	var wg sync.WaitGroup
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				sdjournal.Send("audit test flood", sdjournal.PriNotice, map[string]string{"MOSAIC_TEST_FLOOD": "1"})
				sent.Add(1)
			}
		}()
	}
	waitFor(t, func() bool { return sent.Load() > 10000 })
	r := run(t, bin, "stop", "--take", "--yes", id)
	cancel()
	wg.Wait()
	if r.code != 0 {
		t.Fatalf("stop during the flood: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	// journald writes its notice when the same bucket logs again after the
	// interval that dropped messages. Its clock is when it reads a
	// message, not when it was sent: on a busy machine it reads the
	// flood's tail after the sleep below, and one message sent then can
	// land in the flood's own interval, after which nothing logs again.
	// So one is sent each second until the notice is in.
	time.Sleep(interval + time.Second)
	// journald drains the flood's backlog first: on a loaded machine (two
	// CI runs at once) the notice took longer than waitFor's 20 s.
	var sentAfter time.Time
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(50 * time.Millisecond) {
		if time.Since(sentAfter) >= time.Second {
			sdjournal.Send("audit test: after the flood", sdjournal.PriNotice, nil)
			sentAfter = time.Now()
		}
		r := run(t, "journalctl", "-q", "-o", "json", "--no-pager", "_TRANSPORT=driver", "MESSAGE_ID="+journalDroppedID)
		if strings.Contains(r.stdout, "Suppressed ") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("journald wrote no suppression notice within a minute of the flood")
		}
	}

	r = run(t, bin, "audit", id)
	if r.code != exitUnsettled || !strings.Contains(r.stdout, "journald: suppressed ") {
		t.Fatalf("audit after a suppressed stop: exit %d\nstdout:\n%s\nstderr:\n%s\nwant exit %d naming the suppression", r.code, r.stdout, r.stderr, exitUnsettled)
	}
	proofs := journal(t, "MOSAIC_CONVERSATION="+id) // non-empty: the start entries predate the limit
	if hasEntry(proofs, "MOSAIC_EVENT", "proof") {
		t.Skipf("the flood left the proof entry in (it landed in the first %d of a window): nothing to find missing", 10)
	}
	if !strings.HasPrefix(r.stderr, "mosaicctl: "+codeAuditGap+": ") || !strings.Contains(r.stdout, "MISSING from the journal") ||
		!strings.Contains(r.stdout, "1 proofs in the claim store, 1 missing") {
		t.Fatalf("audit of a proof the journal lost: exit %d\nstdout:\n%s\nstderr:\n%s\nwant audit-gap naming the missing proof", r.code, r.stdout, r.stderr)
	}

	// A user who may not read the system journal, where journald's notices
	// are, is told the suppression was not checked, never "0 suppressed",
	// auditing a conversation of its own (this one it holds nothing of:
	// refused unknown-conversation).
	if env.PeerUser != "" {
		wantRefusal(t, runCmd(t, env.AsPeer(t, bin, "audit", id)), protocol.CodeUnknownConv)
		add := runCmd(t, env.AsPeer(t, "sh", "-c", `set -e; p=$HOME/suppressed; mkdir -p "$p/.pi/state/s/sessions"
"$0" conv add --project "$p" --seat s --session "$p/.pi/state/s/sessions/main.jsonl"`, bin))
		if add.code != 0 {
			t.Fatalf("conv add as the peer: exit %d, stderr %q", add.code, add.stderr)
		}
		r = runCmd(t, env.AsPeer(t, bin, "audit", strings.TrimSpace(add.stdout)))
		if !strings.Contains(r.stdout, "suppression NOT CHECKED") || strings.Contains(r.stdout, "suppressed 0") {
			t.Fatalf("audit by a user who cannot read the system journal: exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
		}
	}
}

// TestReadJournalKeepsLongFields: journalctl's JSON export gives a field
// longer than 4096 bytes as null unless asked for every field whole; a
// proof's body is journaled up to audit.MaxProof, and the audit read a
// proof of a few more members than usual as one journaled without its
// body (TestEndToEndRealPi, now and then).
func TestReadJournalKeepsLongFields(t *testing.T) {
	sandboxtest.Require(t)
	tag := fmt.Sprintf("long-%d-%d", os.Getpid(), time.Now().UnixNano())
	long := strings.Repeat("proof ", 1500) // 9,000 bytes
	if err := sdjournal.Send("audit test: a long field", sdjournal.PriInfo, map[string]string{"MOSAIC_TEST_LONG": tag, "MOSAIC_LONG": long}); err != nil {
		t.Fatal(err)
	}
	var got []journalEntry
	waitFor(t, func() bool {
		var err error
		got, _, err = readJournal(context.Background(), "--user", "MOSAIC_TEST_LONG="+tag)
		return err == nil && len(got) > 0
	})
	if got[0]["MOSAIC_LONG"] != long {
		t.Fatalf("the long field read back as %d bytes (%.40q), want it whole (%d bytes)", len(got[0]["MOSAIC_LONG"]), got[0]["MOSAIC_LONG"], len(long))
	}
}
