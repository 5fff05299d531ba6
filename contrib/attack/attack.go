// Package attack is the adversary of the containment tests: clients of a
// conversation socket that run as processes of their own (the test binary
// re-executed), so the controller judges them, not the test. A test's
// TestMain calls MaybeRun; a test starts a mode with Command, usually
// from inside an engine scope, and reads the mode's one-line JSON report
// from its stdout.
//
// Modes (MOSAIC_ATTACK):
//   - takeover: hello, then takeover at the generation the binding names;
//     reports the reply record.
//   - nodump-takeover: takeover after prctl(PR_SET_DUMPABLE, 0), which
//     makes the process's /proc namespace links unreadable to others.
//   - fork: connect (and hello, with MOSAIC_ATTACK_HELLO=1; and wait for
//     the welcome and binding too, with MOSAIC_ATTACK_HELLO=welcome), hand
//     the connection to a child and exit at once; the child waits until
//     the connecting process is gone, then takes over and reports.
//   - conns: MOSAIC_ATTACK_N connection attempts, holding every connection
//     not refused; prints a progress line when done; once stdin closes it
//     half-closes every connection, reads each to its end and reports.
//   - partial: MOSAIC_ATTACK_N connections, each a hello and then
//     MOSAIC_ATTACK_BYTES bytes without a newline; prints a progress line
//     when every write ended, and the report once stdin closes.
//   - confirm: MOSAIC_ATTACK_N issue-confirmation acquire-recovery-control
//     on one connection; reports the replies by record and code.
package attack

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// Environment of a mode.
const (
	EnvMode   = "MOSAIC_ATTACK"
	EnvSocket = "MOSAIC_ATTACK_SOCK"
	EnvN      = "MOSAIC_ATTACK_N"
	EnvBytes  = "MOSAIC_ATTACK_BYTES"
	EnvHello  = "MOSAIC_ATTACK_HELLO"
	envParent = "MOSAIC_ATTACK_PARENT"
)

// Report is what a mode prints.
type Report struct {
	Reply    map[string]any `json:"reply,omitempty"`    // takeover modes
	Records  map[string]int `json:"records,omitempty"`  // by record kind, refusals by "refusal:<code>"
	Held     int            `json:"held,omitempty"`     // connections open when reporting
	DialErrs int            `json:"dialErrs,omitempty"` // connects that failed
	Written  int            `json:"written,omitempty"`  // partial: writes that completed
	Error    string         `json:"error,omitempty"`
}

// MaybeRun runs the mode named in the environment and exits; without one
// it returns.
func MaybeRun() {
	mode := os.Getenv(EnvMode)
	if mode == "" {
		return
	}
	var rep Report
	var err error
	sock := os.Getenv(EnvSocket)
	n, _ := strconv.Atoi(os.Getenv(EnvN))
	switch mode {
	case "takeover":
		rep, err = takeover(sock)
	case "nodump-takeover":
		if err = unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err == nil {
			rep, err = takeover(sock)
		}
	case "fork":
		err = fork(sock) // the child reports
		if err == nil {
			unix.Exit(0) // no deferred work, no race detector's exit
		}
	case "forked":
		rep, err = forked()
	case "conns":
		rep = conns(sock, n)
	case "partial":
		size, _ := strconv.Atoi(os.Getenv(EnvBytes))
		rep = partial(sock, n, size)
	case "confirm":
		rep, err = confirm(sock, n)
	default:
		err = fmt.Errorf("unknown mode %q", mode)
	}
	if err != nil {
		rep.Error = err.Error()
	}
	b, _ := json.Marshal(rep)
	fmt.Printf("%s\n", b)
	os.Exit(0)
}

// Command returns the command running mode against sock from the current
// test binary, started through wrap (e.g. a shell that first moves itself
// into an engine scope: wrap gets the binary and returns the argv).
func Command(mode, sock string, wrap func(bin string) []string, env ...string) (*exec.Cmd, error) {
	bin, err := os.Executable()
	if err != nil {
		return nil, err
	}
	argv := []string{bin}
	if wrap != nil {
		argv = wrap(bin)
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	// A race-enabled test binary sleeps a second at exit unless told not to.
	gorace := strings.TrimSpace(os.Getenv("GORACE") + " atexit_sleep_ms=0")
	cmd.Env = append(os.Environ(), append([]string{EnvMode + "=" + mode, EnvSocket + "=" + sock, "GORACE=" + gorace}, env...)...)
	return cmd, nil
}

// Parse reads a mode's report from its output.
func Parse(out []byte) (Report, error) {
	var rep Report
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	var last []byte
	for sc.Scan() {
		last = append(last[:0], sc.Bytes()...)
	}
	if err := json.Unmarshal(last, &rep); err != nil {
		return rep, fmt.Errorf("attack report %q: %w", out, err)
	}
	return rep, nil
}

// session is one protocol connection.
type session struct {
	c net.Conn
	r *bufio.Reader
}

func dial(sock string) (*session, error) { return dialSize(sock, 64<<10) }

// dialSize connects with a read buffer of size bytes (a longer record is
// still read whole).
func dialSize(sock string, size int) (*session, error) {
	c, err := net.Dial("unix", sock)
	if err != nil {
		return nil, err
	}
	return &session{c: c, r: bufio.NewReaderSize(c, size)}, nil
}

func (s *session) send(v any) error {
	b, _ := json.Marshal(v)
	_, err := s.c.Write(append(b, '\n'))
	return err
}

func (s *session) next() (map[string]any, error) {
	line, err := s.r.ReadBytes('\n')
	if err != nil {
		return nil, err
	}
	var m map[string]any
	if err := json.Unmarshal(line, &m); err != nil {
		return nil, fmt.Errorf("record %q: %w", line, err)
	}
	return m, nil
}

// hello says hello and returns the generation of the binding that follows
// the welcome.
func (s *session) hello(send bool) (float64, error) {
	s.c.SetDeadline(time.Now().Add(60 * time.Second))
	if send {
		if err := s.send(map[string]any{"type": "hello", "client": "attack"}); err != nil {
			return 0, err
		}
	}
	for {
		m, err := s.next()
		if err != nil {
			return 0, err
		}
		switch m["record"] {
		case "refusal":
			return 0, fmt.Errorf("refused at hello: %v", m)
		case "binding":
			g, _ := m["generation"].(float64)
			return g, nil
		}
	}
}

// request sends cmd and returns the record answering it.
func (s *session) request(cmd map[string]any) (map[string]any, error) {
	if err := s.send(cmd); err != nil {
		return nil, err
	}
	for {
		m, err := s.next()
		if err != nil {
			return nil, err
		}
		if m["request"] == cmd["request"] && m["record"] != "binding" && m["record"] != "stop" {
			return m, nil
		}
	}
}

func takeover(sock string) (Report, error) {
	s, err := dial(sock)
	if err != nil {
		return Report{}, err
	}
	defer s.c.Close()
	return takeoverOn(s, true)
}

func takeoverOn(s *session, hello bool) (Report, error) {
	gen, err := s.hello(hello)
	if err != nil {
		return Report{}, err
	}
	return takeoverAt(s, gen)
}

func takeoverAt(s *session, gen float64) (Report, error) {
	s.c.SetDeadline(time.Now().Add(60 * time.Second))
	m, err := s.request(map[string]any{"type": "takeover", "request": fmt.Sprintf("atk-%d-%d", os.Getpid(), time.Now().UnixNano()), "generation": gen})
	return Report{Reply: m}, err
}

func fork(sock string) error {
	// The child is started first and the connection handed to it over a
	// socket pair, so the connecting process exits within microseconds of
	// its connect: as close to the controller's accept as a tool can get.
	pair, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	bin, err := os.Executable()
	if err != nil {
		return err
	}
	child := exec.Command(bin)
	child.Env = append(os.Environ(), EnvMode+"=forked", envParent+"="+strconv.Itoa(os.Getpid()))
	child.ExtraFiles = []*os.File{os.NewFile(uintptr(pair[1]), "pair")}
	child.Stdout, child.Stderr = os.Stdout, os.Stderr
	if err := child.Start(); err != nil {
		return err
	}
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	if err := unix.Connect(fd, &unix.SockaddrUnix{Name: sock}); err != nil {
		return err
	}
	msg := []byte{'-'}
	if h := os.Getenv(EnvHello); h == "1" || h == "welcome" {
		if _, err := unix.Write(fd, []byte(`{"type":"hello","client":"attack"}`+"\n")); err != nil {
			return err
		}
		if h == "welcome" {
			gen, err := readBinding(fd)
			if err != nil {
				return err
			}
			msg = []byte(strconv.FormatFloat(gen, 'f', -1, 64))
		}
	}
	return unix.Sendmsg(pair[0], msg, unix.UnixRights(fd), nil, 0) // and exit at once
}

// readBinding reads the connection's records a byte at a time (leaving
// nothing buffered for the child) up to the binding after the welcome,
// and returns its generation.
func readBinding(fd int) (float64, error) {
	var line []byte
	b := make([]byte, 1)
	for {
		n, err := unix.Read(fd, b)
		if err != nil || n == 0 {
			return 0, fmt.Errorf("read the welcome: %v", err)
		}
		if b[0] != '\n' {
			line = append(line, b[0])
			continue
		}
		var m map[string]any
		if err := json.Unmarshal(line, &m); err != nil {
			return 0, err
		}
		line = line[:0]
		switch m["record"] {
		case "refusal":
			return 0, fmt.Errorf("refused at hello: %v", m)
		case "binding":
			g, _ := m["generation"].(float64)
			return g, nil
		}
	}
}

func forked() (Report, error) {
	parent, _ := strconv.Atoi(os.Getenv(envParent))
	buf, oob := make([]byte, 32), make([]byte, unix.CmsgSpace(4))
	n, oobn, _, _, err := unix.Recvmsg(3, buf, oob, 0)
	if err != nil {
		return Report{}, fmt.Errorf("receive the connection: %w", err)
	}
	msgs, err := unix.ParseSocketControlMessage(oob[:oobn])
	if err != nil || len(msgs) != 1 {
		return Report{}, fmt.Errorf("receive the connection: %v", err)
	}
	fds, err := unix.ParseUnixRights(&msgs[0])
	if err != nil || len(fds) != 1 {
		return Report{}, fmt.Errorf("receive the connection: %v", err)
	}
	for os.Getppid() == parent || unix.Kill(parent, 0) == nil {
		time.Sleep(time.Millisecond)
	}
	c, err := net.FileConn(os.NewFile(uintptr(fds[0]), "conn"))
	if err != nil {
		return Report{}, err
	}
	defer c.Close()
	s := &session{c: c, r: bufio.NewReaderSize(c, 64<<10)}
	if os.Getenv(EnvHello) == "welcome" { // the parent read the binding
		gen, err := strconv.ParseFloat(string(buf[:n]), 64)
		if err != nil {
			return Report{}, err
		}
		return takeoverAt(s, gen)
	}
	return takeoverOn(s, os.Getenv(EnvHello) != "1")
}

// tally counts records by kind, refusals by code.
type tally struct {
	mu sync.Mutex
	m  map[string]int
}

func (t *tally) add(m map[string]any) {
	k, _ := m["record"].(string)
	if k == "refusal" {
		k += ":" + fmt.Sprint(m["code"])
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.m == nil {
		t.m = map[string]int{}
	}
	t.m[k]++
}

func (t *tally) snapshot() map[string]int {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := map[string]int{}
	for k, v := range t.m {
		out[k] = v
	}
	return out
}

// watch counts the records a connection receives until the server closes
// it, and closes it after a refusal.
func watch(s *session, t *tally, wg *sync.WaitGroup, held *int64mu) {
	defer wg.Done()
	for {
		m, err := s.next()
		if err != nil {
			return
		}
		t.add(m)
		if m["record"] == "refusal" {
			s.c.Close()
			held.add(-1)
			return
		}
	}
}

type int64mu struct {
	mu sync.Mutex
	n  int
}

func (x *int64mu) add(d int) { x.mu.Lock(); x.n += d; x.mu.Unlock() }
func (x *int64mu) get() int  { x.mu.Lock(); defer x.mu.Unlock(); return x.n }

// connsReadBuf is the read buffer of a conns connection: all it ever gets
// is one refusal line. A 64 KiB buffer for each of 20,000 connections
// (with the race detector's shadow of them) took the attacker to 2.8 GB
// of RSS, and the time to fault that in slowed the flood it is meant to
// be.
const connsReadBuf = 512

func conns(sock string, n int) Report {
	var t tally
	var wg sync.WaitGroup
	var held int64mu
	var all []*session
	errs := 0
	for i := 0; i < n; i++ {
		s, err := dialSize(sock, connsReadBuf)
		if err != nil {
			errs++
			continue
		}
		all = append(all, s)
		held.add(1)
		wg.Add(1)
		go watch(s, &t, &wg, &held)
	}
	fmt.Printf("{\"held\":%d,\"dialErrs\":%d}\n", held.get(), errs)
	io.Copy(io.Discard, os.Stdin) // hold until the test has measured
	// Every connection the controller refused has its refusal waiting to
	// be read; a held one ends when the controller sees this side's EOF.
	// The report is taken once every watcher has read its connection to
	// the end, so it counts every record the controller sent, however far
	// the watchers were behind.
	for _, s := range all {
		if uc, ok := s.c.(*net.UnixConn); ok {
			uc.CloseWrite()
		}
	}
	waited := make(chan struct{})
	go func() { wg.Wait(); close(waited) }()
	select {
	case <-waited:
	case <-time.After(time.Minute):
	}
	rep := Report{Records: t.snapshot(), Held: held.get(), DialErrs: errs}
	for _, s := range all {
		s.c.Close()
	}
	return rep
}

func partial(sock string, n, size int) Report {
	var t tally
	var wg, writes sync.WaitGroup
	var held int64mu
	var written int64mu
	var all []*session
	var mu sync.Mutex
	errs := 0
	body := make([]byte, size)
	for i := range body {
		body[i] = 'x'
	}
	sem := make(chan struct{}, 64)
	for i := 0; i < n; i++ {
		s, err := dial(sock)
		if err != nil {
			errs++
			continue
		}
		mu.Lock()
		all = append(all, s)
		mu.Unlock()
		held.add(1)
		wg.Add(1)
		go watch(s, &t, &wg, &held)
		writes.Add(1)
		sem <- struct{}{}
		go func() {
			defer writes.Done()
			defer func() { <-sem }()
			s.c.SetWriteDeadline(time.Now().Add(60 * time.Second))
			if _, err := s.c.Write(append([]byte(`{"type":"hello","client":"attack"}`+"\n"), body...)); err == nil {
				written.add(1)
			}
		}()
	}
	writes.Wait()
	fmt.Printf("{\"written\":%d,\"held\":%d}\n", written.get(), held.get())
	io.Copy(io.Discard, os.Stdin)
	rep := Report{Records: t.snapshot(), Held: held.get(), DialErrs: errs, Written: written.get()}
	for _, s := range all {
		s.c.Close()
	}
	return rep
}

func confirm(sock string, n int) (Report, error) {
	s, err := dial(sock)
	if err != nil {
		return Report{}, err
	}
	defer s.c.Close()
	gen, err := s.hello(true)
	if err != nil {
		return Report{}, err
	}
	s.c.SetDeadline(time.Time{})
	go func() {
		w := bufio.NewWriter(s.c)
		for i := 0; i < n; i++ {
			b, _ := json.Marshal(map[string]any{"type": "issue-confirmation", "request": fmt.Sprintf("cf-%d", i),
				"operation": "acquire-recovery-control", "generation": gen})
			w.Write(append(b, '\n'))
		}
		w.Flush()
	}()
	var t tally
	for got := 0; got < n; {
		m, err := s.next()
		if err != nil {
			return Report{Records: t.snapshot()}, err
		}
		if _, ok := m["request"]; ok {
			t.add(m)
			got++
		}
	}
	return Report{Records: t.snapshot()}, nil
}
