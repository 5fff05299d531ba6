package controller

import (
	"bufio"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mosaic-agents/mosaic/protocol"
)

// dialPaced dials r's socket as a client whose reads the test paces, so
// events pile up in the controller's queues for it; it returns the client
// and its connection id.
func (r *rig) dialPaced(t *testing.T) (*client, string) {
	t.Helper()
	c, err := net.Dial("unix", r.sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(2 * time.Minute)) // bounds a hang only
	k := &client{t: t, c: c, r: bufio.NewReaderSize(c, 1<<20)}
	return k, k.hello()["connection"].(string)
}

// command sends one command line.
func (k *client) command(v map[string]any) {
	k.t.Helper()
	line, err := protocol.Line(v)
	if err != nil {
		k.t.Fatal(err)
	}
	k.send(string(line))
}

// reply reads up to the record answering request.
func (k *client) reply(request string) map[string]any {
	k.t.Helper()
	for {
		if m := k.read(); m["request"] == request {
			return m
		}
	}
}

// queued waits until the controller holds at least n events that
// connection id has yet to take: its client is not reading, so its socket
// buffer is full and its writer blocked.
func (r *rig) queued(t *testing.T, id string, n int) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		r.ctrl.mu.Lock()
		k := r.ctrl.conns[id]
		r.ctrl.mu.Unlock()
		if k != nil && k.lag() >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the controller never queued %d events for %s", n, id)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestReobserveSameConnection re-observes on one connection during a
// running turn while events of its first subscription are still queued
// for it (in the bus queue, the connection's queue and the socket): after
// each observed record the events must be exactly the execution's from
// seam.replayStart on, in order, none of the replaced subscription's (the
// Ctrl-O of mosaicctl attach). Otherwise queued events could follow the
// observed record, and the client would see a gap and re-observe.
func TestReobserveSameConnection(t *testing.T) {
	r := newRig(t, `{"turns":[{"endless":true,"chunkDelayMs":1}]}`, nil)
	r.waitBinding("active")
	p, id := r.dialPaced(t)
	p.command(map[string]any{"type": "observe", "request": "o0"})
	p.reply("o0")
	p.command(map[string]any{"type": "takeover", "request": "t", "generation": r.generation()})
	ctl := p.reply("t")
	p.command(map[string]any{"type": "prompt", "request": "p", "generation": ctl["generation"], "text": "go"})
	if m := p.reply("p"); m["record"] != "receipt" {
		t.Fatalf("prompt: %v", m)
	}
	verified := 0
	for round := 1; round <= 3; round++ {
		r.queued(t, id, outSize/2)
		req := "o" + strconv.Itoa(round)
		p.command(map[string]any{"type": "observe", "request": req})
		obs := p.reply(req)
		if obs["record"] != "observed" {
			t.Fatalf("round %d: %v", round, obs)
		}
		seam := obs["seam"].(map[string]any)
		next, until := seam["replayStart"].(float64), seam["replayUntil"].(float64)
		if quiet := seam["quiet"].(bool); quiet || next > until {
			t.Fatalf("round %d: the turn is running, yet the seam replays nothing: %v", round, seam)
		}
		// The whole replay and some live events after it.
		for next <= until+50 {
			m := p.read()
			if m["record"] == "notice" && m["kind"] == "lost-place" {
				t.Logf("round %d: lost place at %v; not a verdict", round, m["detail"])
				break
			}
			if m["record"] != "event" {
				continue
			}
			if m["execution"] != seam["execution"] || m["seq"].(float64) != next {
				t.Fatalf("round %d: after observed (execution %v, replayStart %v) event %v/%v, want seq %v",
					round, seam["execution"], seam["replayStart"], m["execution"], m["seq"], next)
			}
			next++
		}
		if next > until+50 {
			verified++
		}
	}
	if verified == 0 {
		t.Fatal("every round lost its place: nothing was verified")
	}
}

// TestWriterDropsReplacedEpoch: events of an epoch that a later observed
// record replaced are never written, and an observed record is written
// before the events of its epoch, and a receipt queued after it before
// them too (control first), even when the events were published first.
func TestWriterDropsReplacedEpoch(t *testing.T) {
	k, b, cli := pipeConn(t)
	line := func(s string) []byte { return []byte(s + "\n") }
	s1, _, _ := b.subscribeFrom(0, k.kick)
	k.offerEpoch(line("observed-1"), 1)
	k.follow(b, s1, 1)
	b.publish(ev("e1", 1))
	b.publish(ev("e1", 2))
	k.unsubscribe(b)
	s2, _, _ := b.subscribeFrom(2, k.kick)
	k.offerEpoch(line("observed-2"), 2)
	k.enqueueCtl(line("receipt"))
	k.follow(b, s2, 2)
	b.publish(ev("e1", 3))
	b.publish(ev("e1", 4))
	startWriter(t, k)
	rd := bufio.NewReader(cli)
	want := []string{"observed-1", "observed-2", "receipt", "seq 3", "seq 4"}
	for i, w := range want {
		cli.SetReadDeadline(time.Now().Add(30 * time.Second))
		got, err := rd.ReadBytes('\n')
		if err != nil {
			t.Fatalf("line %d: %v", i, err)
		}
		if strings.HasPrefix(w, "seq ") {
			if seq := seqOf(t, got); "seq "+strconv.FormatUint(seq, 10) != w {
				t.Fatalf("line %d: %q, want %s", i, got, w)
			}
		} else if string(got) != w+"\n" {
			t.Fatalf("line %d: %q, want %q", i, got, w)
		}
	}
}
