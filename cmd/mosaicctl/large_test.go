package main

import (
	"context"
	"encoding/json"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mosaic-agents/mosaic/client"
	"github.com/mosaic-agents/mosaic/contrib/sandboxtest"
	"github.com/mosaic-agents/mosaic/contrib/stubmodel"
	"github.com/mosaic-agents/mosaic/engine"
	"github.com/mosaic-agents/mosaic/history"
)

// largeAnswer is the size of the answer issue 10 saw wedge a conversation.
const largeAnswer = 18 << 20

// TestLargeAnswerOnRealPi: after one 18 MiB assistant message from the
// real Pi, the prompt prints the answer cut where the live stream cuts it
// and says so (exit 4, truncated), the history pages hold it whole, the
// binding says active and open and a normal prompt is answered; after a
// stop and a recovery (whose load check must not read the whole session)
// a prompt is answered again. It logs the controller's peak RSS.
func TestLargeAnswerOnRealPi(t *testing.T) {
	sandboxtest.Require(t)
	pc := realPiConversation(t, "large", stubmodel.Script{Turns: []stubmodel.Turn{
		{Bulk: largeAnswer, ChunkDelayMS: 1},
		{Text: []string{"a normal ", "answer"}},
	}})
	bin, id := pc.bin, pc.id
	bulk := stubmodel.BulkText(largeAnswer)

	r := run(t, bin, "prompt", "--take", id, "write a lot")
	if r.code != exitUnsettled || !strings.HasPrefix(r.stderr, "mosaicctl: truncated: ") {
		t.Fatalf("prompt of the 18 MiB answer: exit %d, stderr %q; want %d truncated", r.code, r.stderr, exitUnsettled)
	}
	// The bound counts the text's JSON form, where each LF is two bytes.
	// The verb ends what it prints with a LF.
	printed := r.stdout
	if !strings.HasPrefix(bulk, printed) {
		printed = strings.TrimSuffix(printed, "\n")
	}
	if len(printed) < engine.MaxLiveString*9/10 || len(printed) > engine.MaxLiveString || !strings.HasPrefix(bulk, printed) {
		t.Fatalf("printed %d bytes of the answer; want a prefix of about %d", len(printed), engine.MaxLiveString)
	}
	st := readStatus(t, bin, id)
	if st.Binding == nil || st.Binding.State != "active" || st.Binding.Admission != "open" || st.Service.MainPID == 0 {
		t.Fatalf("status after the large answer: %+v; want active and open", st.Binding)
	}
	t.Logf("controller after the 18 MiB answer: %s", memoryOf(t, st.Service.MainPID))

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if got := historyText(ctx, t, pc.path, "00000001 bulk"); got != bulk {
		t.Fatalf("the history holds %d bytes of the answer; want all %d", len(got), len(bulk))
	}

	if r := run(t, bin, "prompt", "--take", id, "and now a short one"); r.code != 0 || r.stdout != "a normal answer\n" {
		t.Fatalf("prompt after the large answer: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	if r := run(t, bin, "stop", "--take", "--yes", id); r.code != 0 {
		t.Fatalf("stop: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	if r := run(t, bin, "recover", "--take", id); r.code != 0 || !strings.Contains(r.stdout, "launched: execution ") {
		t.Fatalf("recover over the 18 MiB session: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	if r := run(t, bin, "prompt", "--take", id, "after recover"); r.code != 0 || r.stdout != "Plain answer to: after recover\n" {
		t.Fatalf("prompt after recover: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	st = readStatus(t, bin, id)
	t.Logf("controller at the end: %s", memoryOf(t, st.Service.MainPID))
}

// memoryOf reads a process's current and peak resident set.
func memoryOf(t *testing.T, pid uint32) string {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(int(pid)) + "/status")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, "VmRSS:") || strings.HasPrefix(l, "VmHWM:") {
			out = append(out, strings.Join(strings.Fields(l), " "))
		}
	}
	return strings.Join(out, ", ")
}

// historyText observes the conversation and pages back through its
// history until it has read the whole text of the first block of the
// message whose text starts with prefix, fragment after fragment.
func historyText(ctx context.Context, t *testing.T, path, prefix string) string {
	t.Helper()
	c, err := client.Dial(ctx, path, client.Options{Name: "large-test"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	o, err := c.Observe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var pages []history.Page
	raw, cursor := o.History, o.Cursor
	for {
		var p history.Page
		if err := json.Unmarshal(raw, &p); err != nil {
			t.Fatal(err)
		}
		pages = append([]history.Page{p}, pages...)
		if cursor == "" {
			break
		}
		pr, err := c.OlderPage(ctx, cursor)
		if err != nil {
			t.Fatal(err)
		}
		raw, cursor = pr.History, pr.Cursor
	}
	var text strings.Builder
	entry := ""
	for _, p := range pages {
		for _, part := range p.Parts {
			for _, f := range part.Blocks {
				if entry == "" && f.Block == 0 && f.Fragment == 0 && strings.HasPrefix(f.Content.Text, prefix) {
					entry = part.Entry
				}
				if part.Entry == entry && f.Block == 0 {
					text.WriteString(f.Content.Text)
				}
			}
		}
	}
	return text.String()
}
