package activation

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mosaic-agents/mosaic/client"
	"github.com/mosaic-agents/mosaic/contrib/sandboxtest"
	"github.com/mosaic-agents/mosaic/contrib/stubmodel"
	"github.com/mosaic-agents/mosaic/units"
	"golang.org/x/sys/unix"
)

// echoUnit is the template of the benchmark's baseline, contrib/coldecho:
// its socket and service units are mosaic-conv@'s own, renamed
// (installEcho), so both sides pay the same activation.
const echoUnit = "mosaic-bench-echo@"

// settle is the pause, untimed, between the socket starts and the first
// dial of a round.
const settle = 100 * time.Millisecond

// echoRounds numbers the echo's instances across every run of the
// benchmark in this process (-count), so no instance starts twice.
var echoRounds atomic.Int64

// BenchmarkColdConnect measures a cold connect through socket activation:
// from connect(2) to the welcome, with no controller running, on a real
// mosaic-conv@ socket of a conversation that was never started (the
// pinned Pi talking to the stub model), against the same connect, hello
// and welcome from the smallest activated Go server (contrib/coldecho)
// whose service is not running either. The echo's units are
// mosaic-conv@'s own with the name, socket path and ExecStart changed
// (same socket options, Type=notify, hardening), and both are dialled
// with client.Dial. Each round takes one of each, in alternating order,
// so the ratio x-vs-echo compares them under the same load;
// a new conversation and a new echo instance are started for every round
// (untimed), and the conversation is stopped with a proof after it.
func BenchmarkColdConnect(b *testing.B) {
	env := sandboxtest.Require(b)
	bin := sandboxtest.Bin(b, "mosaicctl")
	pi, model, _ := sandboxtest.StubPi(b, stubmodel.Script{})
	sh(b, bin, "install")
	b.Cleanup(func() { shTry(b, bin, "uninstall", "--force") })
	echoDir := installEcho(b, env, sandboxtest.Bin(b, "coldecho"))

	var conv, echo, exec, echoExec, warm time.Duration
	var ratios []float64
	for b.Loop() {
		b.StopTimer()
		round := int(echoRounds.Add(1))
		id, path := newConversation(b, bin, pi, model)
		service := "mosaic-conv@" + id + ".service"
		echoSock, echoService := echoInstance(echoDir, round)
		// Both sockets listen, and the manager has had a moment to
		// settle, before either side is timed; the order alternates, as
		// the side timed first meets the manager otherwise than the
		// second (its ns/…to-exec differs by up to 9 ms either way).
		// Once welcomed, the controller launches the engine (Node), so
		// an echo timed after it waits until that start is over.
		startSocket(b, service)
		startSocket(b, echoService)
		time.Sleep(settle)
		var d, e, x, ex time.Duration
		if round%2 == 0 {
			e, ex = coldDial(b, echoSock, echoService)
			d, x = coldDial(b, path, service)
		} else {
			d, x = coldDial(b, path, service)
			awaitActive(b, service)
			time.Sleep(settle)
			e, ex = coldDial(b, echoSock, echoService)
		}
		start := time.Now()
		c := dialCold(b, path)
		warm += time.Since(start)
		c.Close()
		endConversation(b, bin, id)
		shTry(b, "systemctl", "--user", "stop", strings.TrimSuffix(echoService, ".service")+".socket", echoService)
		b.StartTimer()
		conv += d
		echo += e
		ratios = append(ratios, float64(d)/float64(e))
		exec += x
		echoExec += ex
	}
	n := float64(b.N)
	b.ReportMetric(float64(conv.Nanoseconds())/n, "ns/cold-welcome")
	b.ReportMetric(float64(exec.Nanoseconds())/n, "ns/to-exec")
	b.ReportMetric(float64(warm.Nanoseconds())/n, "ns/warm-welcome")
	b.ReportMetric(float64(echo.Nanoseconds())/n, "ns/cold-echo")
	b.ReportMetric(float64(echoExec.Nanoseconds())/n, "ns/echo-to-exec")
	b.ReportMetric(float64(conv)/float64(echo), "x-vs-echo")
	// The median of the rounds' own ratios: each round's pair is taken
	// within a moment, so one round that met a load spike on this
	// shared machine moves it less than it moves the ratio of the sums.
	slices.Sort(ratios)
	b.ReportMetric(ratios[len(ratios)/2], "x-median")
}

// coldDial times connect to welcome on the socket at path, whose service
// is not running, and returns with it how long the user manager took to
// start that service's process after the connect (systemd's part; the
// rest is the process's own start and its answer).
func coldDial(b *testing.B, path, service string) (welcome, toExec time.Duration) {
	b.Helper()
	mono := monotonic(b)
	start := time.Now()
	c := dialCold(b, path)
	welcome = time.Since(start)
	c.Close()
	return welcome, execStart(b, service) - mono
}

// monotonic reads CLOCK_MONOTONIC, the clock of systemd's *Monotonic
// timestamps.
func monotonic(b *testing.B) time.Duration {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ts.Nano())
}

// execStart is when the user manager started unit's main process.
func execStart(b *testing.B, unit string) time.Duration {
	b.Helper()
	v := strings.TrimSpace(sh(b, "systemctl", "--user", "show", "--value", "-p", "ExecMainStartTimestampMonotonic", unit))
	us, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		b.Fatalf("ExecMainStartTimestampMonotonic of %s: %q", unit, v)
	}
	return time.Duration(us) * time.Microsecond
}

// installEcho writes the echo's units, mosaic-conv@'s as `mosaicctl
// install` renders them with the echo binary for ExecStart, renamed and
// listening elsewhere, and returns the directory of its sockets. It fails when the rendered
// units no longer have the lines it rewrites, rather than let the echo's
// units drift from the controller's.
func installEcho(b *testing.B, env sandboxtest.Env, echo string) string {
	b.Helper()
	rendered, err := units.Render(echo)
	if err != nil {
		b.Fatal(err)
	}
	dir, err := units.UserDir()
	if err != nil {
		b.Fatal(err)
	}
	sockDir := filepath.Join(env.RuntimeDir, "mosaic-bench-echo")
	rewrite := map[string][][2]string{
		"mosaic-conv@.socket":  {{"ListenStream=%t/mosaic/conv/%i.sock", "ListenStream=" + sockDir + "/%i.sock"}},
		"mosaic-conv@.service": {{" serve --conversation %i\n", "\n"}},
	}
	var names []string
	for _, f := range rendered {
		edits, ok := rewrite[f.Name]
		if !ok {
			continue
		}
		text := string(f.Data)
		for _, e := range edits {
			if !strings.Contains(text, e[0]) {
				b.Fatalf("%s no longer holds %q: update installEcho", f.Name, e[0])
			}
			text = strings.Replace(text, e[0], e[1], 1)
		}
		text = strings.ReplaceAll(text, "mosaic-conv@", echoUnit)
		name := strings.Replace(f.Name, "mosaic-conv@", echoUnit, 1)
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			b.Fatal(err)
		}
		names = append(names, name)
	}
	if len(names) != 2 {
		b.Fatalf("units.Render gave %v of mosaic-conv@'s two units", names)
	}
	b.Cleanup(func() {
		for _, name := range names {
			os.Remove(filepath.Join(dir, name))
		}
		shTry(b, "systemctl", "--user", "daemon-reload")
	})
	sh(b, "systemctl", "--user", "daemon-reload")
	return sockDir
}

// echoInstance names the round's new instance of the echo, as each round
// registers a new conversation: its socket path and service. A new
// instance each round also keeps the echo clear of the units'
// StartLimitBurst=, which a restarted instance would hit.
func echoInstance(dir string, round int) (path, service string) {
	inst := fmt.Sprintf("r%d", round)
	return filepath.Join(dir, inst+".sock"), echoUnit + inst + ".service"
}

// awaitActive waits until service reported READY=1 (the controller does
// once its start is over).
func awaitActive(b *testing.B, service string) {
	b.Helper()
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(20 * time.Millisecond) {
		state := strings.TrimSpace(sh(b, "systemctl", "--user", "show", "--value", "-p", "ActiveState", service))
		if state == "active" {
			return
		}
		if state != "activating" || time.Now().After(deadline) {
			b.Fatalf("%s is %s, not active", service, state)
		}
	}
}

// startSocket starts the socket unit of service.
func startSocket(b *testing.B, service string) {
	b.Helper()
	sh(b, "systemctl", "--user", "start", strings.TrimSuffix(service, ".service")+".socket")
}

// newConversation registers a conversation on the pinned Pi in a fresh
// project (its controller starts on the first connection to its socket,
// which the caller starts).
func newConversation(b *testing.B, bin, pi string, model stubmodel.PiModel) (id, path string) {
	b.Helper()
	home, _ := os.UserHomeDir()
	proj, err := os.MkdirTemp(home, "proj-")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { os.RemoveAll(proj) })
	sessions := filepath.Join(proj, ".pi", "state", "bench", "sessions")
	if err := os.MkdirAll(sessions, 0o755); err != nil {
		b.Fatal(err)
	}
	id = strings.TrimSpace(sh(b, bin, "conv", "add", "--project", proj, "--seat", "bench",
		"--session", filepath.Join(sessions, "main.jsonl"), "--engine", pi,
		"--provider", model.Provider, "--model", model.Model, "--agent-dir", model.AgentDir))
	if path, err = units.SocketPath(id); err != nil {
		b.Fatal(err)
	}
	return id, path
}

// dialCold connects and waits for the welcome.
func dialCold(b *testing.B, path string) *client.Client {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, err := client.Dial(ctx, path, client.Options{Name: "bench"})
	if err != nil {
		b.Fatal(err)
	}
	return c
}

// endConversation stops the engine with a proof, then the units.
func endConversation(b *testing.B, bin, id string) {
	b.Helper()
	shTry(b, bin, "stop", "--take", "--yes", "--timeout", "1m", id)
	shTry(b, "systemctl", "--user", "stop", "mosaic-conv@"+id+".socket", "mosaic-conv@"+id+".service")
}

func sh(b *testing.B, name string, args ...string) string {
	b.Helper()
	out, err := exec.Command(name, args...).Output()
	if err != nil {
		var stderr string
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = string(ee.Stderr)
		}
		b.Fatalf("%s %s: %v: %s", name, strings.Join(args, " "), err, stderr)
	}
	return string(out)
}

func shTry(b *testing.B, name string, args ...string) {
	b.Helper()
	if out, err := exec.Command(name, args...).CombinedOutput(); err != nil {
		b.Logf("%s %s: %v: %s", name, strings.Join(args, " "), err, out)
	}
}
