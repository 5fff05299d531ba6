package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mosaic-agents/mosaic/contrib/fakeanthropic"
	"github.com/mosaic-agents/mosaic/contrib/sandboxtest"
	hclaude "github.com/mosaic-agents/mosaic/history/claude"
	"github.com/mosaic-agents/mosaic/internal/xdg"
	"github.com/mosaic-agents/mosaic/protocol"
	"github.com/mosaic-agents/mosaic/units"
)

// claudeRig is a Claude conversation against its own fake.
type claudeRig struct {
	bin, id, proj, path, svc string
	fake                     *fakeanthropic.Server
}

func newClaudeRig(t *testing.T, seat string, extra ...string) claudeRig {
	t.Helper()
	bin := sandboxtest.Bin(t, "mosaicctl")
	cl := sandboxtest.Claude(t)
	fake := sandboxtest.FakeAnthropic(t)
	mustRun(t, bin, "install")
	t.Cleanup(func() { run(t, bin, "uninstall", "--force") })
	id, proj := addClaude(t, bin, cl, seat, fake.URL, extra...)
	path, err := units.SocketPath(id)
	if err != nil {
		t.Fatal(err)
	}
	return claudeRig{bin: bin, id: id, proj: proj, path: path, svc: "mosaic-conv@" + id + ".service", fake: fake}
}

// transcripts is every transcript line of the conversation, read from
// its configuration directory as the user (outside any engine).
func (r claudeRig) transcripts(t *testing.T) string {
	t.Helper()
	state, err := xdg.StateHome()
	if err != nil {
		t.Fatal(err)
	}
	s, err := readTranscripts(filepath.Join(state, "mosaic", "claude", r.id, "config"))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// transcriptLeaf is the default leaf of the conversation's transcript of
// session, read as the user (outside any engine).
func (r claudeRig) transcriptLeaf(t *testing.T, session string) string {
	t.Helper()
	tr, err := hclaude.Read(r.transcript(t, session))
	if err != nil || tr.New() {
		t.Fatalf("transcript of session %s: %v (new %v)", session, err, err == nil && tr.New())
	}
	return tr.DefaultLeaf()
}

// transcript names the conversation's transcript of session.
func (r claudeRig) transcript(t *testing.T, session string) hclaude.Ref {
	t.Helper()
	state, err := xdg.StateHome()
	if err != nil {
		t.Fatal(err)
	}
	return hclaude.Ref{ConfigDir: filepath.Join(state, "mosaic", "claude", r.id, "config"), Project: r.proj, Session: session}
}

// requestsWith counts the fake's requests whose reply kind is s or whose
// scripted text holds s.
func (r claudeRig) requestsWith(s string) int {
	n := 0
	for _, q := range r.fake.Requests() {
		if q.Reply == s || strings.Contains(q.Arg, s) {
			n++
		}
	}
	return n
}

// settledIdle waits until a fresh connection's binding shows the engine
// idle (or no longer active) and returns it.
func (r claudeRig) settledIdle(t *testing.T, ctx context.Context) protocol.Binding {
	t.Helper()
	return restartRig{path: r.path}.settled(t, ctx)
}

// TestClaudeRestartMidStream: `systemctl --user restart` of a Claude
// conversation's controller while the CLI streams leaves the same engine
// running (same pids: re-attached through the fd store, not adopted as an
// orphan); the restarted controller learns from initialize that a turn is
// in progress, the turn completes with its run-settled on the new bus,
// the transcript holds the reply once, the prompt reached the model once,
// its queue item settles delivered from the transcript (the prompt line
// after the position its dispatch recorded), and the next prompt runs on
// the same engine.
func TestClaudeRestartMidStream(t *testing.T) {
	sandboxtest.Require(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	r := newClaudeRig(t, "crestart")
	lib := activeLib(t, ctx, r.path)
	if _, err := lib.c.Takeover(ctx); err != nil {
		t.Fatal(err)
	}
	rc, err := lib.c.Prompt(ctx, "please SLOW")
	if err != nil || rc.State != protocol.ReceiptAcknowledged || rc.Item == "" {
		t.Fatalf("prompt: %v %+v", err, rc)
	}
	if err := r.fake.WaitRequests(ctx, 1); err != nil {
		t.Fatal(err)
	}
	scope := lib.c.State().Binding.Scope
	pids := enginePIDs(t, scope)
	time.Sleep(3 * fakeanthropic.SlowDelay) // mid-stream: the reply takes 6 s
	mustRun(t, "systemctl", "--user", "restart", r.svc)

	b, notices := currentBinding(t, ctx, r.path)
	if b.Restart == nil || b.Restart.Resume != 1 || b.State == protocol.BindingUncertain {
		t.Fatalf("binding after the restart %+v (restart %+v); want a re-attach, resume 1", b, b.Restart)
	}
	if len(notices) == 0 || notices[0].Kind != protocol.NoticeRestarted {
		t.Fatalf("notices %+v; want %q", notices, protocol.NoticeRestarted)
	}
	after := dialLib(t, r.path)
	b = r.settledIdle(t, ctx)
	if b.State != protocol.BindingActive || b.Restart == nil || !b.Restart.RunInProgress {
		t.Fatalf("binding once settled %+v (restart %+v); want active, the run seen in progress", b, b.Restart)
	}
	if got := enginePIDs(t, scope); !slices.Equal(got, pids) {
		t.Fatalf("engine pids %v, before the restart %v: the engine was not kept", got, pids)
	}
	waitFor(t, func() bool { return after.runs() >= 1 })
	if n := strings.Count(r.transcripts(t), fakeanthropic.SlowText()); n != 1 {
		t.Fatalf("the transcript holds the slow reply %d times; want once", n)
	}
	if n := r.requestsWith("slow"); n != 1 {
		t.Fatalf("the model saw the prompt %d times; want once", n)
	}
	// The restarted controller settled the item dispatched before it from
	// the transcript's prompt line after the recorded position.
	waitFor(t, func() bool { return after.c.State().Queue != nil })
	var item *protocol.QueueItem
	for _, it := range after.c.State().Queue.Items {
		if it.ID == rc.Item {
			item = &it
		}
	}
	if item == nil || item.State != protocol.ReceiptDelivered {
		t.Fatalf("the item dispatched before the restart is %+v; want delivered (queue %+v)", item, after.c.State().Queue)
	}

	if _, err := after.c.Takeover(ctx); err != nil {
		t.Fatal(err)
	}
	if rc, err := after.c.Prompt(ctx, "after the restart"); err != nil || rc.State != protocol.ReceiptAcknowledged {
		t.Fatalf("prompt after the restart: %v %+v", err, rc)
	}
	waitFor(t, func() bool { return after.runs() >= 2 })
	if got := enginePIDs(t, scope); !slices.Equal(got, pids) {
		t.Fatalf("engine pids %v after the next prompt, before the restart %v", got, pids)
	}
	if !strings.Contains(r.transcripts(t), "You said: after the restart") {
		t.Fatal("the prompt after the restart did not reach the same session")
	}
}

// TestClaudeRestartApprovalPending: a controller restarted while the CLI
// waits on a permission request re-reads it from initialize's
// pending_permission_requests and projects it again; approve --yes then
// allows it once on the same engine, and the tool runs.
func TestClaudeRestartApprovalPending(t *testing.T) {
	sandboxtest.Require(t)
	r := newClaudeRig(t, "capprove")
	marker := filepath.Join(r.proj, "allowed")
	p, _ := promptAwaitingApproval(t, r.bin, r.id, "please BASH{touch "+marker+"}", r.fake)
	mustRun(t, "systemctl", "--user", "restart", r.svc)
	p.Wait() // its connection went with the old controller
	var listed string
	for deadline := time.Now().Add(time.Minute); !strings.Contains(listed, "Bash"); time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the pending request was not projected again after the restart: %q", listed)
		}
		listed = run(t, r.bin, "approve", r.id).stdout
	}
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("the tool ran before the approval")
	}
	if res := run(t, r.bin, "approve", "--take", r.id, "--yes"); res.code != 0 || !strings.Contains(res.stdout, "allow-once") {
		t.Fatalf("approve --yes after the restart: exit %d, %q %q", res.code, res.stdout, res.stderr)
	}
	waitFor(t, func() bool { _, err := os.Stat(marker); return err == nil })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if b := r.settledIdle(t, ctx); b.State != protocol.BindingActive || b.Restart == nil {
		t.Fatalf("binding %+v; want active after the re-attach", b)
	}
}

// TestClaudeRestartRightAfterPrompt: `systemctl --user restart` at once
// after a prompt is acknowledged, before the CLI has written its prompt
// line: the line lands after the bytes the old controller handed over,
// under a uuid only the old controller sent. It handed that over too
// (Handover's announcements), so the next controller proves the line, the
// binding stays active, and the reply lands on the same engine. The test
// checks that the line did land after the handed-over bytes (up to three
// tries), else it tested nothing.
func TestClaudeRestartRightAfterPrompt(t *testing.T) {
	rightAfterPrompt(t, "crestartprompt", []string{"restart"}, "its predecessor's handover")
}

// TestClaudeCrashRightAfterPrompt: as above, but the controller is
// killed (SIGKILL): the prompt's uuid reaches the next controller
// through the mark the dead one kept (controller/markkeep.go), written
// as the prompt was sent.
func TestClaudeCrashRightAfterPrompt(t *testing.T) {
	rightAfterPrompt(t, "ccrashprompt", []string{"kill", "--signal=KILL"}, "the mark its predecessor kept (it ended without a handover)")
}

// rightAfterPrompt ends the controller with `systemctl --user <how>` at
// once after a prompt is acknowledged, and checks that the next
// controller vouches from the bytes of from, with announcements, and
// proves the prompt's line landing after them.
func rightAfterPrompt(t *testing.T, name string, how []string, from string) {
	sandboxtest.Require(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	r := newClaudeRig(t, name)
	session := promptOnce(t, ctx, r.path, "hello there").SessionID // the session exists: the next line appends
	path, err := r.transcript(t, session).Path()
	if err != nil {
		t.Fatal(err)
	}
	handed := regexp.MustCompile(`the watch vouches for the (\d+) bytes of ` + regexp.QuoteMeta(from) + `, with (\d+) of its announcements`)
	for try := 1; ; try++ {
		lib := activeLib(t, ctx, r.path)
		if _, err := lib.c.Takeover(ctx); err != nil {
			t.Fatal(err)
		}
		text := fmt.Sprintf("please SLOW %d", try)
		if rc, err := lib.c.Prompt(ctx, text); err != nil || rc.State != protocol.ReceiptAcknowledged {
			t.Fatalf("prompt: %v %+v", err, rc)
		}
		mustRun(t, "systemctl", append(append([]string{"--user"}, how...), r.svc)...)
		after := dialLib(t, r.path)
		j := run(t, "bash", "-c", "journalctl --user --no-pager -o cat -u "+r.svc).stdout
		m := handed.FindAllStringSubmatch(j, -1)
		if len(m) < try || m[len(m)-1][2] == "0" {
			t.Fatalf("try %d: the journal names no handover with announcements:\n%s", try, j)
		}
		size, _ := strconv.Atoi(m[len(m)-1][1])
		waitFor(t, func() bool { return strings.Count(r.transcripts(t), fakeanthropic.SlowText()) >= try })
		b := r.settledIdle(t, ctx)
		if b.State != protocol.BindingActive || b.Restart == nil {
			t.Fatalf("try %d: binding once settled %+v (restart %+v); want active after a re-attach\n%s", try, b, b.Restart,
				run(t, "bash", "-c", "journalctl --user --no-pager -o cat -u "+r.svc+" | tail -20").stdout)
		}
		waitFor(t, func() bool { return after.runs() >= 1 })
		raw, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		at := bytes.Index(raw, []byte(`"text":"`+text+`"`))
		if at < 0 {
			t.Fatalf("try %d: no prompt line says %q", try, text)
		}
		if at >= size {
			return // the line landed after the handed-over bytes, and was proven
		}
		t.Logf("try %d: the prompt's line landed within the %d bytes handed over; again", try, size)
		if try == 3 {
			t.Fatal("in three tries the prompt's line always landed before the handover: the test did not test the line after it")
		}
		after.c.Close()
		lib.c.Close()
	}
}
