package fakepi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"time"

	"golang.org/x/sys/unix"

	"github.com/mosaic-agents/mosaic/contrib/stubmodel"
)

// Environment variables the fake reads.
const (
	EnvScript     = "FAKEPI_SCRIPT"
	EnvControl    = "FAKEPI_CONTROL"
	EnvStdinLog   = "FAKEPI_STDIN_LOG"
	EnvSessionLog = "FAKEPI_SESSION_LOG"
	EnvRetryDelay = "FAKEPI_RETRY_DELAY_MS"
	// EnvStdinStall: a prompt whose message is exactly this text is
	// handled as any other, then the fake never reads its stdin again
	// (stall).
	EnvStdinStall = "FAKEPI_STDIN_STALL"
	EnvAgentDir   = "PI_CODING_AGENT_DIR"
)

func openAppend(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	return f, nil
}

// Main runs the fake Pi on the given argv (without the program name),
// environment lookup and standard streams, and returns the exit code:
// 0 at stdin EOF, 1 on a crash the real Pi also has, 2 on bad usage.
func Main(argv []string, getenv func(string) string, stdin io.Reader, stdout, stderr io.Writer) int {
	fail := func(code int, err error) int {
		fmt.Fprintf(stderr, "fakepi: %v\n", err)
		return code
	}
	args, err := ParseArgs(argv)
	if err != nil {
		return fail(2, err)
	}
	var script stubmodel.Script
	if p := getenv(EnvScript); p != "" {
		if script, err = stubmodel.LoadScript(p); err != nil {
			return fail(2, err)
		}
	}
	var stdinLog, sessLog io.Writer
	if p := getenv(EnvStdinLog); p != "" {
		f, err := openAppend(p)
		if err != nil {
			return fail(2, err)
		}
		defer f.Close()
		stdinLog = f
	}
	if p := getenv(EnvSessionLog); p != "" {
		f, err := openAppend(p)
		if err != nil {
			return fail(2, err)
		}
		defer f.Close()
		sessLog = f
	}
	retryDelay := 20 * time.Millisecond
	if v := getenv(EnvRetryDelay); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return fail(2, fmt.Errorf("%s: bad value %q", EnvRetryDelay, v))
		}
		retryDelay = time.Duration(n) * time.Millisecond
	}
	flood, err := floodCount(getenv(EnvFlood))
	if err != nil {
		return fail(2, err)
	}
	cwd, err := os.Getwd()
	if err != nil {
		return fail(2, fmt.Errorf("getwd: %w", err))
	}
	var ctl *controlServer
	if p := getenv(EnvControl); p != "" {
		if ctl, err = listenControl(p); err != nil {
			return fail(2, err)
		}
		defer ctl.close()
	}

	e := &engine{
		out: stdout, ctl: ctl, cwd: cwd, now: time.Now,
		thinking: "off", script: script.Turns, autoRetry: true, retryDelay: retryDelay,
		dialogs: map[string]chan json.RawMessage{}, flood: flood,
	}
	if args.Thinking != "" {
		e.thinking = args.Thinking
	}
	e.model = unknownModel()
	e.api, e.provider, e.modelID = "unknown", "unknown", "unknown"
	if args.Provider != "" && args.Model != "" {
		e.hasModel = true
		e.provider, e.modelID = args.Provider, args.Model
		e.model, e.api = lookupModel(getenv(EnvAgentDir), args.Provider, args.Model)
	}
	if e.sess, err = openSession(args.Session, cwd, sessLog, e.now); err != nil {
		return fail(1, err)
	}
	if err := e.startupAppend(); err != nil {
		return fail(1, err)
	}

	lr := &lineReader{r: stdin, log: stdinLog}
	for {
		line, err := lr.next()
		if errors.Is(err, io.EOF) {
			e.pause(PointStdinEOF, nil)
			return 0
		}
		if err != nil {
			return fail(1, err)
		}
		if err := e.handleLine(line); err != nil {
			fmt.Fprintln(stderr, err)
			return 1
		}
		if stall := getenv(EnvStdinStall); stall != "" && promptText(line) == stall {
			return stallStdin()
		}
	}
}

// promptText is the message of a prompt line, "" for anything else.
func promptText(line []byte) string {
	var p struct{ Type, Message string }
	if json.Unmarshal(line, &p) != nil || p.Type != "prompt" {
		return ""
	}
	return p.Message
}

// stallStdin is an engine whose stdin reader hangs (a blocked event loop,
// a hostile engine) while the process lives on and its run goes on: the
// controller's writes fill the socket's buffer and then block. It ends
// after maxEndless, so a forgotten fake ends.
func stallStdin() int {
	time.Sleep(maxEndless)
	return 0
}

// startupAppend is the pinned Pi's startup append (sdk.js): a session with
// messages gains a thinking_level_change when its branch has none; a
// session without messages gains a model_change (when a model is set) and
// a thinking_level_change at every start.
func (e *engine) startupAppend() error {
	if e.sess.hasMessages() {
		e.messages = restoreMessages(e.sess)
		if !e.sess.hasThinkingOnBranch() {
			if _, err := e.sess.append("thinking_level_change", obj{{"thinkingLevel", e.thinking}}); err != nil {
				return err
			}
		}
		return nil
	}
	if e.hasModel {
		if _, err := e.sess.append("model_change", obj{{"provider", e.provider}, {"modelId", e.modelID}}); err != nil {
			return err
		}
	}
	_, err := e.sess.append("thinking_level_change", obj{{"thinkingLevel", e.thinking}})
	return err
}

// restoreMessages counts the messages on the resumed session, so
// get_state's messageCount matches Pi's after a restart.
func restoreMessages(s *session) []obj {
	var out []obj
	for range s.messageEntries() {
		out = append(out, obj{{"role", "restored"}})
	}
	return out
}

// Run is Main with the process's own argv, environment and streams.
// What the process inherited above stderr (the agent directory it is
// handed) it keeps to itself, as Pi's Node does: its tools, which run
// without the tool shell here, do not get it.
func Run(_ context.Context) int {
	if err := unix.CloseRange(3, ^uint(0), unix.CLOSE_RANGE_CLOEXEC); err != nil {
		fmt.Fprintln(os.Stderr, "fakepi: close_range:", err)
		return 1
	}
	return Main(os.Args[1:], os.Getenv, os.Stdin, os.Stdout, os.Stderr)
}
