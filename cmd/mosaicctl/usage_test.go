package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mosaic-agents/mosaic/protocol"
	"github.com/urfave/cli/v2"
)

// TestLostControlNamesTheFix: a verb whose command was refused because
// another client took control between its takeover and its command
// (stale-generation, revoked: two `--take` racing) says that nothing was
// done and what to run, as every refusal of a verb does.
func TestLostControlNamesTheFix(t *testing.T) {
	const id = "pi-0123456789abcdef0123"
	for _, code := range []string{protocol.CodeStaleGeneration, protocol.CodeRevoked} {
		t.Run(code, func(t *testing.T) {
			err := withHint(protocol.Refuse(code, "the controller generation is 3, not the expected one; someone else took control"), "prompt", id)
			if protocol.CodeOf(err) != code {
				t.Fatalf("withHint changed the code: %v", err)
			}
			for _, want := range []string{"nothing was done", "`mosaicctl attach " + id + "`", "run the command again"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("%s refusal %q; want it to say %q", code, err, want)
				}
			}
		})
	}
}

// TestNotControllerHint: the hint a verb refused not-controller gives is
// its own command line with --take, as typed; the queue's acting forms
// name their sub-verb and the conversation after it, never the sub-verb
// as the id.
func TestNotControllerHint(t *testing.T) {
	const id = "pi-0123456789abcdef0123"
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"prompt", id, "hi"}, "`mosaicctl prompt --take " + id + " TEXT`"},
		{[]string{"stop", id}, "`mosaicctl stop --take --yes " + id + "`"},
		{[]string{"interrupt", id}, "`mosaicctl interrupt --take " + id + "`"},
		{[]string{"queue", "resume", id}, "`mosaicctl queue resume --take " + id + "`"},
		{[]string{"queue", "cancel", id, "item-1"}, "`mosaicctl queue cancel --take " + id + " ITEM`"},
		{[]string{"queue", "edit", id, "item-1", "new"}, "`mosaicctl queue edit --take " + id + " ITEM TEXT`"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			set := flag.NewFlagSet(tc.args[0], flag.ContinueOnError)
			if err := set.Parse(tc.args[1:]); err != nil {
				t.Fatal(err)
			}
			c := cli.NewContext(cli.NewApp(), set, nil)
			c.Command = &cli.Command{Name: tc.args[0]}
			verb, cid := verbAndID(c)
			if cid != id {
				t.Fatalf("verbAndID(%q) = %q, %q; want the id %s", tc.args, verb, cid, id)
			}
			err := withHint(protocol.Refuse(protocol.CodeNotController, "this connection does not control the conversation"), verb, cid)
			if !strings.Contains(err.Error(), "pass --take to take control first: "+tc.want) {
				t.Fatalf("hint %q; want %s", err, tc.want)
			}
		})
	}
}

// TestTimeoutInWords: a verb that gives up at --timeout says so in words
// and what to do, never Go's "context deadline exceeded", whether the wait
// was the verb's own or the client's; errors.Is still sees the deadline.
func TestTimeoutInWords(t *testing.T) {
	for _, tc := range []struct {
		name string
		run  func(ctx context.Context) error
		want string
	}{
		{"the verb's wait", func(ctx context.Context) error {
			<-ctx.Done()
			return fmt.Errorf("wait for the engine to launch: %w", context.Cause(ctx))
		}, "wait for the engine to launch: the --timeout of 10ms passed; run it again with a longer --timeout (--timeout 0 waits without limit)"},
		{"a refusal is left alone", func(ctx context.Context) error {
			<-ctx.Done()
			return protocol.Refuse(protocol.CodeBusy, "a turn is running")
		}, "busy: a turn is running"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got error
			app := &cli.App{Name: "mosaicctl", ExitErrHandler: func(*cli.Context, error) {}, Commands: []*cli.Command{{
				Name: "verb", Flags: verbFlags(),
				Action: func(c *cli.Context) error {
					got = oneShot(func(ctx context.Context, _ *cli.Context) error { return tc.run(ctx) })(c)
					return nil
				},
			}}}
			if err := app.Run([]string{"mosaicctl", "verb", "--timeout", "10ms", anID}); err != nil {
				t.Fatal(err)
			}
			if got == nil || got.Error() != tc.want {
				t.Fatalf("error %q; want %q", got, tc.want)
			}
			if _, refused := got.(*protocol.Refusal); !refused && !errors.Is(got, context.DeadlineExceeded) {
				t.Errorf("errors.Is(%v, context.DeadlineExceeded) is false", got)
			}
		})
	}
}

// TestHintBeforeEngineEnd: a refusal that carries the engine's end (its
// exit and stderr, indented lines after the refusal's own) gets the hint
// on the refusal's line, not after the engine's last stderr line, where
// it read as the engine's words.
func TestHintBeforeEngineEnd(t *testing.T) {
	const id = "pi-0123456789abcdef0123"
	b := &protocol.Binding{EngineEnd: &protocol.EngineEnd{Execution: "e-1", Status: "exit status 1",
		Stderr: []string{`Error: Unknown provider "x".`}}}
	err := withHint(withEngineEnd(protocol.Refuse(protocol.CodeNotController, "this connection is an observer"), b), "prompt", id)
	lines := strings.Split(err.Error(), "\n")
	if len(lines) != 3 || !strings.HasSuffix(lines[0], "pass --take to take control first: `mosaicctl prompt --take "+id+" TEXT`") ||
		lines[2] != `    Error: Unknown provider "x".` {
		t.Fatalf("refusal:\n%s\nwant the hint on the first line, the engine's stderr last, unchanged", err)
	}
}

// TestAttachNeedsATerminal: attach with stdin that is no terminal (a
// script's `attach </dev/null`) is refused with the usage code, naming
// the verbs scripts use, before it dials: the socket given does not
// exist, and a dial would have said so instead.
func TestAttachNeedsATerminal(t *testing.T) {
	null, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	saved := os.Stdin
	os.Stdin = null
	t.Cleanup(func() { os.Stdin = saved; null.Close() })
	err = newApp().RunContext(context.Background(), []string{"mosaicctl", "attach", "--socket", filepath.Join(t.TempDir(), "none.sock"), "pi-0123456789abcdef0123"})
	if protocol.CodeOf(err) != protocol.CodeUsage || !strings.Contains(fmt.Sprint(err), "scripts use prompt") {
		t.Fatalf("attach </dev/null: %v; want a usage refusal naming the one-shot verbs", err)
	}
}

// TestHelloTimeout: hello gives up after its --timeout on a socket that
// accepts and never answers (a controller stuck at start), saying it did
// not answer within that time, and refuses a negative one as usage.
func TestHelloTimeout(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "stuck.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			t.Cleanup(func() { c.Close() })
		}
	}()
	const id = "pi-0123456789abcdef0123"
	err = newApp().RunContext(context.Background(), []string{"mosaicctl", "hello", "--timeout", "200ms", "--socket", sock, id})
	if err == nil || !strings.Contains(err.Error(), "did not answer within 200ms") {
		t.Fatalf("hello on a silent socket: %v; want it to give up after --timeout", err)
	}
	err = newApp().RunContext(context.Background(), []string{"mosaicctl", "hello", "--timeout", "-1s", "--socket", sock, id})
	if protocol.CodeOf(err) != protocol.CodeUsage {
		t.Fatalf("hello --timeout -1s: %v; want usage", err)
	}
}
