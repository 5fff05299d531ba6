package web

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/mosaic-agents/mosaic/contrib/sandboxtest"
	"github.com/mosaic-agents/mosaic/protocol"
)

// TestJudgingBounded: with maxJudging judgements running, one more
// request waits for a turn and, when none comes in time, is refused
// web-busy (HTTP 503) without being judged or served; once a turn frees,
// the next is judged as usual.
func TestJudgingBounded(t *testing.T) {
	s, l := judgingServer(t)
	client, err := net.Dial("tcp4", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	server, err := l.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer server.Close()
	r := httptest.NewRequest("GET", "/", nil)
	r = r.WithContext(withConn(r.Context(), server))

	for range maxJudging {
		s.judging <- struct{}{}
	}
	err = s.checkPeer(r, 50*time.Millisecond)
	var ref *protocol.Refusal
	if !errors.As(err, &ref) || ref.Code != protocol.CodeWebBusy || peerStatus(err) != 503 {
		t.Fatalf("a request past %d judgements at once: %v, want web-busy (503)", maxJudging, err)
	}
	<-s.judging
	if err := s.checkPeer(r, 50*time.Millisecond); err != nil {
		t.Fatalf("with a turn free, this process's own connection: %v", err)
	}
	if len(s.judging) != maxJudging-1 {
		t.Fatalf("the judgement did not give its turn back: %d held", len(s.judging))
	}
}

// TestTurnTakesAFreePlace: a request whose context is already done (its
// client closed the connection before the server read it) still gets a
// free place to be judged, never web-busy; only with every place taken is
// it refused.
func TestTurnTakesAFreePlace(t *testing.T) {
	s, err := New(context.Background(), Options{Store: &Store{Dir: t.TempDir()}})
	if err != nil {
		t.Fatal(err)
	}
	done, cancel := context.WithCancel(context.Background())
	cancel()
	for i := range 200 {
		release, err := s.turn(done, judgeWait)
		if err != nil {
			t.Fatalf("round %d: a done request with every place free was refused: %v", i, err)
		}
		release()
	}
	for range maxJudging {
		if _, err := s.turn(context.Background(), judgeWait); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.turn(done, judgeWait); protocol.CodeOf(err) != protocol.CodeWebBusy {
		t.Fatalf("with every place taken a done request got %v, want %s", err, protocol.CodeWebBusy)
	}
}

// refusedWithoutATurn runs script (its %d the port to connect to) in the
// scope name with props, takes the connection it makes once it wrote a
// byte, and asks checkPeer about it with every judging turn taken: the
// refusal must come from the socket alone, without a turn.
func refusedWithoutATurn(t *testing.T, name string, props []string, script string) *protocol.Refusal {
	t.Helper()
	s, l := judgingServer(t)
	sandboxtest.Scope(t, name, props, fmt.Sprintf(script, l.Addr().(*net.TCPAddr).Port))
	server, err := l.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer server.Close()
	server.SetReadDeadline(time.Now().Add(20 * time.Second))
	if _, err := server.Read(make([]byte, 1)); err != nil {
		t.Fatal(err)
	}
	r := httptest.NewRequest("GET", "/", nil)
	r = r.WithContext(withConn(r.Context(), server))
	for range maxJudging {
		s.judging <- struct{}{}
	}
	err = s.checkPeer(r, time.Second)
	var ref *protocol.Refusal
	if !errors.As(err, &ref) || ref.Code != protocol.CodeWebPeer {
		t.Fatalf("with every judging turn taken: %v, want web-peer without a turn", err)
	}
	return ref
}

// TestEngineRefusedWithoutATurn (sandbox): a socket made inside an engine
// scope is refused web-peer before it waits for a judging turn, so a
// tool's flood of requests, each slow to judge, cannot hold every turn
// and keep the user's own requests waiting until they are refused
// web-busy.
func TestEngineRefusedWithoutATurn(t *testing.T) {
	sandboxtest.Require(t)
	name := fmt.Sprintf("mosaic-engine-webturn-%d", os.Getpid())
	if ref := refusedWithoutATurn(t, name, nil, `exec 3<>/dev/tcp/127.0.0.1/%d; printf 'x' >&3; sleep 60`); !strings.Contains(ref.Message, name) {
		t.Fatalf("an engine's request: %q, want the refusal to name %s", ref.Message, name)
	}
}

// TestUnplacedSocketRefusedWithoutATurn (sandbox): a tool makes its socket
// in a sub-cgroup of its (delegated) engine scope, then leaves the
// sub-cgroup and removes it before it sends. The kernel still reports the
// removed cgroup's id for the socket, and no look places it. The request
// is refused web-peer from the socket alone, before it waits for a
// judging turn, as an engine scope's is.
func TestUnplacedSocketRefusedWithoutATurn(t *testing.T) {
	sandboxtest.Require(t)
	ref := refusedWithoutATurn(t, fmt.Sprintf("mosaic-engine-unplaced-%d", os.Getpid()), []string{"Delegate=yes"}, `
cg=/sys/fs/cgroup$(sed -n 's/^0:://p' /proc/self/cgroup)
mkdir "$cg/s" && echo $BASHPID > "$cg/s/cgroup.procs" || exit 1
exec 3<>/dev/tcp/127.0.0.1/%d
echo $BASHPID > "$cg/cgroup.procs" && rmdir "$cg/s" || exit 1
printf 'x' >&3
sleep 60`)
	if !strings.Contains(ref.Message, "cannot be vouched for") {
		t.Fatalf("a socket made in a removed sub-cgroup: %q, want it not vouched for", ref.Message)
	}
}

// judgingServer is a server that serves nothing and a loopback listener
// whose connections its tests judge, closed when the test ends.
func judgingServer(t *testing.T) (*Server, net.Listener) {
	t.Helper()
	s, err := New(context.Background(), Options{Store: &Store{Dir: t.TempDir()}})
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return s, l
}
