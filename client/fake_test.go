package client

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mosaic-agents/mosaic/protocol"
)

// fakeServer speaks protocol v1 as docs/protocol.md describes it, just far
// enough for the client's tests: one conversation, one actor (every
// connection is the same uid), an engine that is idle or busy, stops that
// settle at once. It decodes client lines strictly and checks that each
// command carries exactly its fields, so the client is tested against the
// document, not against itself.
type fakeServer struct {
	t    *testing.T
	path string
	l    net.Listener
	wg   sync.WaitGroup

	mu         sync.Mutex
	conns      map[string]*fakeConn
	nconn      int
	gen        int64
	exec       string
	nexec      int
	controller string
	busy       bool
	stopped    string // the proven stop, if any
	settled    uint64 // seq of the last run-settled event (non-quiet replay starts after it)
	revoked    map[string]bool
	events     []protocol.Event
	window     int // replay window in events; 0 holds all
	history    json.RawMessage
	quiet      bool
	records    map[string]fakeRecord
	dispatched map[string]int
	confs      map[string]*protocol.Confirmation
	eligs      map[string]bool
	nid        int

	// Test hooks, set before clients connect.
	refuseHello string                                     // refuse every hello with this code
	speaks      int                                        // the newest protocol it speaks (0: protocol.Version)
	hellos      []int                                      // the protocol each hello named
	starting    chan struct{}                              // welcome "starting"; read nothing and send the binding once closed
	drop        func(cmd protocol.Command) bool            // close the connection instead of replying
	gate        func(cmd protocol.Command) <-chan struct{} // reply once the channel closes
	backlog     int                                        // listen with this backlog (0: the system's)
	accepting   chan struct{}                              // accept nothing until it closes
}

type fakeConn struct {
	id        string
	c         net.Conn
	wmu       sync.Mutex
	hello     bool
	observing bool
	lost      bool
}

type fakeRecord struct {
	cmd   protocol.Command
	reply any
}

func newFake(t *testing.T, setup func(*fakeServer)) *fakeServer {
	t.Helper()
	dir, err := os.MkdirTemp("", "mc-") // short: sun_path holds 108 bytes
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	f := &fakeServer{t: t, path: filepath.Join(dir, "c.sock"), gen: 1, exec: "x-1", nexec: 1,
		history: json.RawMessage(`{"entries":[]}`), quiet: true,
		conns: map[string]*fakeConn{}, records: map[string]fakeRecord{}, dispatched: map[string]int{},
		confs: map[string]*protocol.Confirmation{}, eligs: map[string]bool{}, revoked: map[string]bool{}}
	if setup != nil {
		setup(f)
	}
	if f.backlog > 0 {
		f.l, err = listenBacklog(f.path, f.backlog)
	} else {
		f.l, err = net.Listen("unix", f.path)
	}
	if err != nil {
		t.Fatal(err)
	}
	f.wg.Add(1)
	go f.accept()
	t.Cleanup(func() {
		f.l.Close()
		f.mu.Lock()
		for _, k := range f.conns {
			k.c.Close()
		}
		f.mu.Unlock()
		f.wg.Wait()
	})
	return f
}

func (f *fakeServer) accept() {
	defer f.wg.Done()
	if f.accepting != nil {
		<-f.accepting
	}
	for {
		c, err := f.l.Accept()
		if err != nil {
			return
		}
		f.mu.Lock()
		f.nconn++
		k := &fakeConn{id: fmt.Sprintf("k-%d", f.nconn), c: c}
		f.conns[k.id] = k
		f.mu.Unlock()
		f.wg.Add(1)
		go f.serve(k)
	}
}

func (k *fakeConn) send(v any) {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	k.wmu.Lock()
	defer k.wmu.Unlock()
	k.c.SetWriteDeadline(time.Now().Add(5 * time.Second))
	k.c.Write(append(b, '\n'))
}

func (f *fakeServer) serve(k *fakeConn) {
	defer f.wg.Done()
	defer func() {
		f.mu.Lock()
		delete(f.conns, k.id)
		f.mu.Unlock()
		k.c.Close()
	}()
	lines := protocol.NewLineReader(k.c, protocol.MaxLine)
	line, err := lines.Next()
	if err != nil {
		return
	}
	var h protocol.Hello
	if err := protocol.Decode(line, &h); err != nil || h.Type != "hello" {
		k.send(protocol.Refuse(protocol.CodeHelloRequired, "hello first").Record(""))
		return
	}
	f.mu.Lock()
	f.hellos = append(f.hellos, h.Protocol)
	f.mu.Unlock()
	if f.refuseHello != "" {
		k.send(protocol.Refuse(f.refuseHello, "refused by the test").Record(""))
		return
	}
	speaks := protocol.Version
	if f.speaks != 0 {
		speaks = f.speaks
	}
	if h.Protocol > speaks {
		// As the controller refuses a hello naming a newer protocol.
		k.send(protocol.Refuse(protocol.CodeProtocolVersion, "protocol %d is not supported", h.Protocol).Record(""))
		return
	}
	f.mu.Lock()
	k.send(protocol.Welcome{Record: "welcome", Conversation: "c-test", Connection: k.id,
		Mode: ModeObserver, Server: "fake/1", Protocol: max(h.Protocol, 1), Starting: f.starting != nil})
	k.hello = true
	f.mu.Unlock()
	if f.starting != nil {
		// As a controller that answered the hello before its start-up:
		// the connection is held, then its binding comes first.
		<-f.starting
		f.mu.Lock()
		k.send(f.binding())
		f.mu.Unlock()
	}
	for {
		line, err := lines.Next()
		if errors.Is(err, protocol.ErrLineTooLong) {
			// As the controller does (server.go readFailed): refuse,
			// naming no request, and close without reading the rest.
			k.send(protocol.Refuse(protocol.CodeLineTooLong, "a line exceeded the cap; the connection is closed").Record(""))
			return
		}
		if err != nil {
			return
		}
		var cmd protocol.Command
		if err := protocol.Decode(line, &cmd); err != nil {
			k.send(asRefusal(err).Record(""))
			continue
		}
		if err := checkFields(line, cmd.Type); err != nil {
			k.send(protocol.Refuse(protocol.CodeMalformed, "%v", err).Record(cmd.Request))
			continue
		}
		if f.gate != nil {
			if ch := f.gate(cmd); ch != nil {
				f.wg.Add(1)
				go func() {
					defer f.wg.Done()
					<-ch
					f.handle(k, cmd)
				}()
				continue
			}
		}
		f.handle(k, cmd)
	}
}

func asRefusal(err error) *protocol.Refusal {
	var r *protocol.Refusal
	if errors.As(err, &r) {
		return r
	}
	return protocol.Refuse(protocol.CodeMalformed, "%v", err)
}

// commandFields lists each command's fields as docs/protocol.md gives
// them: required, then optional after a "?".
var commandFields = map[string]string{
	protocol.CmdObserve:                "type request ? fromSeq",
	protocol.CmdTakeover:               "type request generation",
	protocol.CmdAcquireRecoveryControl: "type request generation confirmation",
	protocol.CmdPrompt:                 "type request generation execution ? text",
	protocol.CmdInterrupt:              "type request generation",
	protocol.CmdIssueConfirmation:      "type request operation generation",
	protocol.CmdAnswerConfirmation:     "type request confirmation answer",
	protocol.CmdForceStop:              "type request generation confirmation",
	protocol.CmdRecover:                "type request generation confirmation",
	protocol.CmdLaunch:                 "type request generation eligibility",
}

func checkFields(line []byte, typ string) error {
	spec, ok := commandFields[typ]
	if !ok {
		return nil
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(line, &m); err != nil {
		return err
	}
	req, opt, _ := strings.Cut(spec, "?")
	allowed := map[string]bool{"retry": true}
	for _, name := range strings.Fields(req) {
		if _, ok := m[name]; !ok {
			return fmt.Errorf("%s needs %q", typ, name)
		}
		allowed[name] = true
	}
	for _, name := range strings.Fields(opt) {
		allowed[name] = true
	}
	for name := range m {
		if !allowed[name] {
			return fmt.Errorf("%s takes no %q", typ, name)
		}
	}
	return nil
}

// handle serves one command under the fake's lock.
func (f *fakeServer) handle(k *fakeConn, cmd protocol.Command) {
	f.mu.Lock()
	defer f.mu.Unlock()
	refuse := func(code, format string, args ...any) {
		k.send(protocol.Refuse(code, format, args...).Record(cmd.Request))
	}
	if cmd.Type != protocol.CmdObserve { // every other command is deduplicated

		if rec, ok := f.records[cmd.Request]; ok {
			if !sameCommand(rec.cmd, cmd) {
				refuse("conflicting-request", "request %s was used for another command", cmd.Request)
				return
			}
			k.send(rec.reply)
			return
		}
		if cmd.Retry {
			refuse("receipt-unknown", "no receipt for request %s", cmd.Request)
			return
		}
	}
	controllerOnly := cmd.Type != protocol.CmdObserve && cmd.Type != protocol.CmdTakeover &&
		cmd.Type != protocol.CmdAcquireRecoveryControl && cmd.Type != protocol.CmdAnswerConfirmation &&
		cmd.Type != protocol.CmdApproval && cmd.Operation != protocol.CmdAcquireRecoveryControl
	if controllerOnly {
		if f.revoked[k.id] {
			refuse("revoked", "connection %s lost control", k.id)
			return
		}
		if k.id != f.controller {
			refuse("not-controller", "connection %s is not the controller", k.id)
			return
		}
		if cmd.Generation == nil || *cmd.Generation != f.gen {
			refuse("stale-generation", "generation is %d", f.gen)
			return
		}
	}
	switch cmd.Type {
	case protocol.CmdObserve:
		f.observe(k, cmd)
	case protocol.CmdTakeover:
		switch {
		case k.id == f.controller:
			refuse("already-controller", "already the controller")
		case *cmd.Generation != f.gen:
			refuse("stale-generation", "generation is %d", f.gen)
		case f.stopped != "":
			refuse("fenced", "admission is closed")
		default:
			f.transfer(k, cmd)
		}
	case protocol.CmdAcquireRecoveryControl:
		switch {
		case f.stopped == "":
			refuse("fenced", "admission is open: take over instead")
		case !f.use(k, cmd.Confirmation, cmd.Type):
			refuse("confirmation", "no answered confirmation %s", cmd.Confirmation)
		default:
			f.transfer(k, cmd)
		}
	case protocol.CmdPrompt:
		trimmed := strings.TrimLeft(cmd.Text, " \t\r\n")
		switch {
		case cmd.Execution != f.exec:
			refuse("target", "execution is %s", f.exec)
		case f.stopped != "":
			refuse("fenced", "admission is closed")
		case cmd.Text == "":
			refuse("draft", "empty")
		case strings.HasPrefix(trimmed, "/"):
			refuse("text-policy", "slash text")
		case f.busy:
			refuse("busy", "the engine is busy")
		default:
			f.dispatched[cmd.Type]++
			f.busy = true
			f.receipt(k, cmd, protocol.ReceiptAcknowledged, "")
		}
	case protocol.CmdInterrupt:
		if !f.busy {
			refuse("no-turn", "nothing runs")
			return
		}
		f.dispatched[cmd.Type]++
		id := f.id("s")
		for _, st := range []string{"fenced", "cancelling", "reconciled"} {
			s := protocol.Stop{Record: "stop", ID: id, Kind: "interrupt", Execution: f.exec, State: st}
			if st == "reconciled" {
				s.TurnProof = json.RawMessage(`{"record":"turnProof"}`)
			}
			f.broadcast(func(*fakeConn) any { return s })
		}
		f.busy = false
		f.receipt(k, cmd, protocol.ReceiptReconciled, id)
	case protocol.CmdIssueConfirmation:
		c := &protocol.Confirmation{Record: "confirmation", ID: f.id("cf"), Request: cmd.Request,
			Operation: cmd.Operation, State: "issued", Connection: k.id, Execution: f.exec,
			Generation: f.gen, Intent: "stop every process of execution " + f.exec,
			Expires: "2099-01-01T00:00:00Z", Digest: "sha256:0"}
		f.confs[c.ID] = c
		f.reply(k, cmd, *c)
	case protocol.CmdAnswerConfirmation:
		c, ok := f.confs[cmd.Confirmation]
		if !ok || c.Connection != k.id || c.State != "issued" {
			refuse("confirmation", "confirmation %s cannot be answered", cmd.Confirmation)
			return
		}
		c.State = "answered"
		if cmd.Answer == AnswerDecline {
			c.State = "declined"
		}
		r := *c
		r.Request = cmd.Request
		f.reply(k, cmd, r)
	case protocol.CmdForceStop:
		if !f.use(k, cmd.Confirmation, cmd.Type) {
			refuse("confirmation", "no answered confirmation %s", cmd.Confirmation)
			return
		}
		f.dispatched[cmd.Type]++
		id := f.id("s")
		for _, st := range []string{"fenced", "stopping", "stopped"} {
			s := protocol.Stop{Record: "stop", ID: id, Kind: "force-stop", Execution: f.exec, State: st}
			if st == "stopped" {
				s.Proof, s.ProofDigest = json.RawMessage(`{"record":"cohortProof"}`), "sha256:1"
			}
			f.broadcast(func(*fakeConn) any { return s })
		}
		f.busy, f.stopped = false, id
		f.broadcastBinding()
		f.receipt(k, cmd, protocol.ReceiptStopped, id)
	case protocol.CmdRecover:
		switch {
		case !f.use(k, cmd.Confirmation, cmd.Type):
			refuse("confirmation", "no answered confirmation %s", cmd.Confirmation)
		case f.stopped == "":
			refuse("stop-proof", "no proven stop")
		default:
			id := f.id("el")
			f.eligs[id] = true
			f.reply(k, cmd, protocol.Eligibility{Record: "eligibility", ID: id, Request: cmd.Request,
				Conversation: "c-test", Stop: f.stopped, ProofDigest: "sha256:1",
				SessionID: "sess", Leaf: "leaf", Generation: f.gen})
		}
	case protocol.CmdLaunch:
		if !f.eligs[cmd.Eligibility] {
			refuse("eligibility", "unknown or used eligibility %s", cmd.Eligibility)
			return
		}
		delete(f.eligs, cmd.Eligibility)
		f.dispatched[cmd.Type]++
		f.nexec++
		f.exec, f.events, f.stopped = fmt.Sprintf("x-%d", f.nexec), nil, ""
		f.gen++
		f.broadcastBinding()
		f.receipt(k, cmd, protocol.ReceiptLaunched, "")
	case protocol.CmdApproval:
		refuse("unsupported-capability", "dialogs are not supported")
	default:
		refuse(protocol.CodeUnknownCommand, "unknown command %q", cmd.Type)
	}
}

func sameCommand(a, b protocol.Command) bool {
	a.Retry, b.Retry = false, false
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return bytes.Equal(x, y)
}

func (f *fakeServer) id(prefix string) string {
	f.nid++
	return fmt.Sprintf("%s-%d", prefix, f.nid)
}

// use consumes an answered confirmation of this connection for op.
func (f *fakeServer) use(k *fakeConn, id, op string) bool {
	c, ok := f.confs[id]
	if !ok || c.Connection != k.id || c.State != "answered" || c.Operation != op {
		return false
	}
	c.State = "used"
	return true
}

func (f *fakeServer) receipt(k *fakeConn, cmd protocol.Command, state, stop string) {
	r := protocol.Receipt{Record: "receipt", ID: f.id("rc"), Request: cmd.Request, Command: cmd.Type,
		State: state, Revision: 1, Execution: f.exec, Generation: f.gen, Actor: "uid:0",
		Connection: k.id, Digest: "sha256:2", Stop: stop}
	f.reply(k, cmd, r)
}

// reply records rec as the answer to cmd (an exact retry gets it again)
// and sends it, unless the test drops it with the connection.
func (f *fakeServer) reply(k *fakeConn, cmd protocol.Command, rec any) {
	f.records[cmd.Request] = fakeRecord{cmd: cmd, reply: rec}
	if f.drop != nil && f.drop(cmd) {
		k.c.Close()
		return
	}
	k.send(rec)
}

// transfer makes k the controller. Like the real server, the broadcasts
// (control to the others, the binding to all) are queued before k's reply.
func (f *fakeServer) transfer(k *fakeConn, cmd protocol.Command) {
	revoked := f.controller
	f.gen++
	f.controller = k.id
	if revoked != "" {
		f.revoked[revoked] = true
	}
	delete(f.revoked, k.id)
	f.broadcast(func(o *fakeConn) any {
		if o == k {
			return nil
		}
		return protocol.ControlRecord{Record: "control", Generation: f.gen, Controller: k.id, Mode: ModeObserver, Revoked: revoked}
	})
	f.broadcastBinding()
	f.reply(k, cmd, protocol.ControlRecord{Record: "control", Request: cmd.Request, Generation: f.gen,
		Controller: k.id, Mode: ModeController, Revoked: revoked})
}

func (f *fakeServer) binding() protocol.Binding {
	b := protocol.Binding{Record: "binding", Conversation: "c-test", State: protocol.BindingActive,
		Admission: "open", Execution: f.exec, Generation: f.gen, Controller: f.controller,
		ControllerConnected: f.conns[f.controller] != nil, EngineState: "idle"}
	if f.busy {
		b.EngineState = "busy"
	}
	if f.stopped != "" {
		b.State, b.Admission, b.AdmissionReason, b.EngineState, b.LastStop =
			protocol.BindingStopped, "closed", "stopped", "none", f.stopped
	}
	return b
}

func (f *fakeServer) broadcastBinding() {
	b := f.binding()
	f.broadcast(func(*fakeConn) any { return b })
}

// broadcast sends rec(k) to every connection past its hello.
func (f *fakeServer) broadcast(rec func(*fakeConn) any) {
	for _, k := range f.conns {
		if !k.hello {
			continue
		}
		if v := rec(k); v != nil {
			k.send(v)
		}
	}
}

// window returns the seqs of the replay window: [first, last].
func (f *fakeServer) bounds() (first, last uint64) {
	last = uint64(len(f.events))
	first = 1
	if f.window > 0 && len(f.events) > f.window {
		first = last - uint64(f.window) + 1
	}
	if last == 0 {
		first = 0
	}
	return first, last
}

func (f *fakeServer) observe(k *fakeConn, cmd protocol.Command) {
	first, last := f.bounds()
	seam := protocol.Seam{Execution: f.exec, Replay: "available", ReplayFrom: first, ReplayUntil: last, Quiet: f.quiet}
	var replay []protocol.Event
	after := f.settled // a cut that is not quiet replays the running turn
	if f.quiet {
		after = last
	}
	if cmd.FromSeq != nil {
		after = *cmd.FromSeq
	}
	{
		from := after + 1
		if first > 0 && from < first {
			seam.Reconcile, from = true, first
		}
		seam.ReplayStart = from
		for s := from; s >= 1 && s <= last; s++ {
			replay = append(replay, f.events[s-1])
		}
	}
	seam.Reconcile = seam.Reconcile || !f.quiet
	k.send(protocol.Observed{Record: "observed", Request: cmd.Request, Binding: f.binding(), History: f.history, Seam: seam})
	for _, ev := range replay {
		k.send(ev)
	}
	k.observing, k.lost = true, false
}

// publish appends n events of the current execution and sends them to
// every observing connection that has not lost its place.
func (f *fakeServer) publish(n int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for range n {
		ev := protocol.Event{Record: protocol.RecordEvent, Kind: protocol.EventTextDelta, Execution: f.exec,
			Seq: uint64(len(f.events) + 1), Message: "m-1", Role: "assistant",
			Block: protocol.Ordinal(0), Fragment: protocol.Ordinal(len(f.events)), UpdateMode: protocol.UpdateAppend,
			Text: fmt.Sprintf("t%d ", len(f.events)+1)}
		f.events = append(f.events, ev)
		for _, k := range f.conns {
			if k.observing && !k.lost {
				k.send(ev)
			}
		}
	}
}

// settle publishes a run-settled event and makes the next cut quiet.
func (f *fakeServer) settle() {
	f.mu.Lock()
	defer f.mu.Unlock()
	ev := protocol.Event{Record: protocol.RecordEvent, Kind: protocol.EventRunSettled, Execution: f.exec,
		Seq: uint64(len(f.events) + 1)}
	f.events = append(f.events, ev)
	f.settled, f.quiet, f.busy = ev.Seq, true, false
	for _, k := range f.conns {
		if k.observing && !k.lost {
			k.send(ev)
		}
	}
}

func (f *fakeServer) setQuiet(quiet bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.quiet = quiet
}

// losePlace detaches connection id from the live stream as a slow reader.
func (f *fakeServer) losePlace(id string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	k := f.conns[id]
	k.lost = true
	k.send(protocol.Notice{Record: "notice", Kind: protocol.NoticeLostPlace, Message: "too slow",
		Detail: json.RawMessage(fmt.Sprintf(`{"missedFrom":%d}`, len(f.events)+1))})
}

func (f *fakeServer) setBusy(busy bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.busy = busy
}

func (f *fakeServer) count(typ string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.dispatched[typ]
}
