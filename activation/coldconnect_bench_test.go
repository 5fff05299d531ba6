package activation

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mosaic-agents/mosaic/client"
	"github.com/mosaic-agents/mosaic/contrib/sandboxtest"
	"github.com/mosaic-agents/mosaic/contrib/stubmodel"
	"github.com/mosaic-agents/mosaic/units"
	"golang.org/x/sys/unix"
)

// echoChildEnv makes the test binary the trivial activated Go echo of
// BenchmarkColdConnect: it takes the activated listener and writes every
// line it reads back.
const echoChildEnv = "MOSAIC_ACTIVATION_ECHO_CHILD"

const echoUnit = "mosaic-bench-echo"

// echoChild serves the echo until the service is stopped.
func echoChild() {
	l, err := Listener()
	if err != nil {
		fmt.Fprintln(os.Stderr, "echo:", err)
		os.Exit(1)
	}
	for {
		c, err := l.Accept()
		if err != nil {
			os.Exit(0)
		}
		go func() {
			defer c.Close()
			r := bufio.NewReader(c)
			for {
				line, err := r.ReadBytes('\n')
				if err != nil {
					return
				}
				if _, err := c.Write(line); err != nil {
					return
				}
			}
		}()
	}
}

// BenchmarkColdConnect measures a cold connect through socket activation:
// from connect(2) to the welcome, with no controller running, on a real
// mosaic-conv@ socket of a conversation that was never started (the
// pinned Pi talking to the stub model), against the same connect, hello
// and one line back from a trivial activated Go echo whose service is not
// running either. Each round takes one of each, interleaved, so the ratio
// x-vs-echo compares them under the same load; a new conversation is
// registered for every round (untimed) and stopped with a proof after it.
func BenchmarkColdConnect(b *testing.B) {
	env := sandboxtest.Require(b)
	bin := sandboxtest.Bin(b, "mosaicctl")
	pi, model, _ := sandboxtest.StubPi(b, stubmodel.Script{})
	sh(b, bin, "install")
	b.Cleanup(func() { shTry(b, bin, "uninstall", "--force") })
	echoSock := installEcho(b, env)

	var conv, echo, exec, warm time.Duration
	for b.Loop() {
		b.StopTimer()
		e := coldEcho(b, echoSock)
		id, path := newConversation(b, bin, pi, model)
		mono := monotonic(b)
		start := time.Now()
		c := dialCold(b, path)
		d := time.Since(start)
		c.Close()
		// Where the time went: systemd starting the controller's process
		// (what the echo pays too), the rest is the controller's start-up.
		exec += execStart(b, "mosaic-conv@"+id+".service") - mono
		start = time.Now()
		c = dialCold(b, path)
		warm += time.Since(start)
		c.Close()
		endConversation(b, bin, id)
		b.StartTimer()
		conv += d
		echo += e
	}
	n := float64(b.N)
	b.ReportMetric(float64(conv.Nanoseconds())/n, "ns/cold-welcome")
	b.ReportMetric(float64(exec.Nanoseconds())/n, "ns/to-exec")
	b.ReportMetric(float64(warm.Nanoseconds())/n, "ns/warm-welcome")
	b.ReportMetric(float64(echo.Nanoseconds())/n, "ns/cold-echo")
	b.ReportMetric(float64(conv)/float64(echo), "x-vs-echo")
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

// installEcho writes and starts the echo's socket unit; its service runs
// this test binary as echoChild.
func installEcho(b *testing.B, env sandboxtest.Env) string {
	b.Helper()
	self, err := os.Executable()
	if err != nil {
		b.Fatal(err)
	}
	home, err := os.UserHomeDir()
	if err != nil {
		b.Fatal(err)
	}
	dir := filepath.Join(home, ".config", "systemd", "user")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		b.Fatal(err)
	}
	sock := filepath.Join(env.RuntimeDir, echoUnit+".sock")
	files := map[string]string{
		echoUnit + ".socket":  fmt.Sprintf("[Socket]\nListenStream=%s\nSocketMode=0600\nFileDescriptorName=%s\n", sock, FDName),
		echoUnit + ".service": fmt.Sprintf("[Service]\nEnvironment=%s=1\nExecStart=%s\n", echoChildEnv, self),
	}
	for name, text := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	b.Cleanup(func() {
		shTry(b, "systemctl", "--user", "stop", echoUnit+".socket", echoUnit+".service")
		for name := range files {
			os.Remove(filepath.Join(dir, name))
		}
		shTry(b, "systemctl", "--user", "daemon-reload")
	})
	sh(b, "systemctl", "--user", "daemon-reload")
	sh(b, "systemctl", "--user", "start", echoUnit+".socket")
	return sock
}

// coldEcho stops the echo's service, then times connect, hello and the
// line back.
func coldEcho(b *testing.B, sock string) time.Duration {
	b.Helper()
	sh(b, "systemctl", "--user", "stop", echoUnit+".service")
	hello := []byte(`{"type":"hello","client":"bench","protocol":1}` + "\n")
	start := time.Now()
	c, err := net.DialTimeout("unix", sock, time.Minute)
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(time.Minute))
	if _, err := c.Write(hello); err != nil {
		b.Fatal(err)
	}
	line, err := bufio.NewReader(c).ReadBytes('\n')
	if err != nil || string(line) != string(hello) {
		b.Fatalf("echo answered %q, %v", line, err)
	}
	return time.Since(start)
}

// newConversation registers a conversation on the pinned Pi in a fresh
// project and starts its socket (its controller starts on the first
// connection).
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
	sh(b, "systemctl", "--user", "start", "mosaic-conv@"+id+".socket")
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
