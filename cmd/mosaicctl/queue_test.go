package main

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mosaic-agents/mosaic/contrib/sandboxtest"
	"github.com/mosaic-agents/mosaic/contrib/stubmodel"
	"github.com/mosaic-agents/mosaic/protocol"
)

// The queue on the pinned Pi with the stub model: three prompts sent back
// to back with --no-wait while the first one streams are each queued at
// once, then answered in order, each exactly once (one model request
// per prompt, its own text last); `mosaicctl queue` lists them with their
// states, and a prompt without --no-wait waits for its own turn behind
// the queue and prints only its answer.
func TestQueueOnRealPi(t *testing.T) {
	sandboxtest.Require(t)
	pc := realPiConversation(t, "queue", stubmodel.Script{Turns: []stubmodel.Turn{
		slowTurn(12, 150),
		{Text: []string{"answer ", "two"}},
		{Text: []string{"answer ", "three"}},
		{Text: []string{"answer ", "four"}},
	}})
	bin, id, stub := pc.bin, pc.id, pc.stub
	defer endConversation(t, bin, id)

	texts := []string{"first prompt", "second prompt", "third prompt"}
	for _, text := range texts {
		r := run(t, bin, "prompt", "--take", "--no-wait", id, text)
		if r.code != 0 || !strings.HasPrefix(r.stdout, protocol.ReceiptQueued+": receipt rc-") || !strings.Contains(r.stdout, "item qi-") {
			t.Fatalf("prompt --no-wait %q: exit %d, stdout %q, stderr %q; want queued with its receipt and item", text, r.code, r.stdout, r.stderr)
		}
	}
	// Waits behind the three, and prints its own answer only.
	if r := run(t, bin, "prompt", "--take", id, "fourth prompt"); r.code != 0 || r.stdout != "answer four\n" {
		t.Fatalf("prompt behind the queue: exit %d, stdout %q, stderr %q; want its own answer", r.code, r.stdout, r.stderr)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	reqs, err := stub.WaitRequests(ctx, 4)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, q := range reqs {
		got = append(got, q.LastUserText)
	}
	if strings.Join(got, "|") != "first prompt|second prompt|third prompt|fourth prompt" {
		t.Fatalf("the model was asked %q; want each prompt once, in order", got)
	}

	r := run(t, bin, "queue", "--json", id)
	if r.code != 0 {
		t.Fatalf("queue --json: exit %d, stderr %q", r.code, r.stderr)
	}
	// The last queue record printed; the observed answer carries one too,
	// nested, and may be printed after it.
	var q protocol.Queue
	for _, line := range strings.Split(r.stdout, "\n") {
		var head struct {
			Record string `json:"record"`
		}
		if json.Unmarshal([]byte(line), &head) != nil || head.Record != protocol.RecordQueue {
			continue
		}
		if err := json.Unmarshal([]byte(line), &q); err != nil {
			t.Fatal(err)
		}
	}
	if len(q.Items) != 4 {
		t.Fatalf("queue lists %d items: %+v; want the four finished ones", len(q.Items), q)
	}
	for _, it := range q.Items {
		if it.State != protocol.ReceiptAcknowledged {
			t.Fatalf("item %s is %s; want acknowledged", it.ID, it.State)
		}
	}
	if r := run(t, bin, "queue", id); r.code != 0 || strings.Count(r.stdout, protocol.ReceiptAcknowledged) != 4 {
		t.Fatalf("queue: exit %d, stdout %q", r.code, r.stdout)
	}
	if r := run(t, bin, "queue", "cancel", "--take", id, q.Items[0].ID); r.code != 2 || !strings.Contains(r.stderr, protocol.CodeItemDispatched) {
		t.Fatalf("queue cancel of an answered item: exit %d, stderr %q; want item-dispatched", r.code, r.stderr)
	}
	// Nothing is paused: a resume is not refused (a script may resume
	// when unsure), and says there was nothing to resume.
	if r := run(t, bin, "queue", "resume", "--take", id); r.code != 0 || !strings.HasPrefix(r.stdout, "not paused: nothing to resume") {
		t.Fatalf("queue resume of a queue not paused: exit %d, stdout %q, stderr %q; want exit 0 saying nothing to resume", r.code, r.stdout, r.stderr)
	}
}

// TestQueueResumeAfterInterrupt: an interrupt pauses the queue with an
// item waiting; `queue resume --take` says it resumed (the table it
// prints still shows the item queued: dispatch follows the reply), and
// the item is then answered. A stop without --take, from a script, is
// refused not-controller naming both fixes it needs at once, and takes
// nothing (the generation stays).
func TestQueueResumeAfterInterrupt(t *testing.T) {
	sandboxtest.Require(t)
	pc := realPiConversation(t, "resume", stubmodel.Script{Turns: []stubmodel.Turn{
		slowTurn(20, 200),
		{Text: []string{"answer ", "two"}},
	}})
	bin, id := pc.bin, pc.id
	for _, text := range []string{"first prompt", "second prompt"} {
		if r := run(t, bin, "prompt", "--take", "--no-wait", id, text); r.code != 0 {
			t.Fatalf("prompt --no-wait %q: exit %d, %q", text, r.code, r.stderr)
		}
	}
	if r := run(t, bin, "interrupt", "--take", id); r.code != 0 {
		t.Fatalf("interrupt: exit %d, %q %q", r.code, r.stdout, r.stderr)
	}
	if r := run(t, bin, "queue", id); !strings.HasPrefix(r.stdout, "paused: interrupt ") {
		t.Fatalf("queue after the interrupt: %q; want it paused", r.stdout)
	}
	st := readStatus(t, bin, id)
	r := run(t, bin, "stop", id)
	wantRefusal(t, r, protocol.CodeNotController)
	if !strings.Contains(r.stderr, "pass --take to take control first and --yes to consent") || !strings.Contains(r.stderr, "`mosaicctl stop --take --yes "+id+"`") {
		t.Fatalf("stop without --take or --yes: %q; want both fixes named at once", r.stderr)
	}
	if after := readStatus(t, bin, id); st.Generation == nil || after.Generation == nil || *after.Generation != *st.Generation {
		t.Fatalf("a refused stop moved the generation: %v -> %v", st.Generation, after.Generation)
	}
	if r := run(t, bin, "queue", "resume", "--take", id); r.code != 0 || !strings.HasPrefix(r.stdout, "resumed: ") {
		t.Fatalf("queue resume of a paused queue: exit %d, stdout %q, stderr %q; want it to say resumed", r.code, r.stdout, r.stderr)
	}
	waitFor(t, func() bool {
		return strings.Count(run(t, bin, "queue", id).stdout, protocol.ReceiptAcknowledged) == 2
	})
}

// slowTurn is a turn that streams n chunks, ms apart: one that still runs
// while the next prompts are queued.
func slowTurn(n, ms int) stubmodel.Turn {
	return stubmodel.Turn{Text: slices.Repeat([]string{"one "}, n), ChunkDelayMS: ms}
}
