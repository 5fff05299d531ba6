package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"syscall"
	"testing"
	"time"
)

// TestSignalCause: a verb ended by a signal says so in a sentence, not
// "then terminated signal received before its turn settled".
func TestSignalCause(t *testing.T) {
	for _, tc := range []struct {
		sig  syscall.Signal
		want string
	}{
		{syscall.SIGTERM, "the prompt was acknowledged (receipt rc-1), then a terminate signal arrived before its turn settled"},
		{syscall.SIGINT, "the prompt was acknowledged (receipt rc-1), then an interrupt signal (Ctrl-C) arrived before its turn settled"},
	} {
		t.Run(tc.sig.String(), func(t *testing.T) {
			ctx, stop := signalContext(context.Background())
			defer stop()
			if err := syscall.Kill(os.Getpid(), tc.sig); err != nil {
				t.Fatal(err)
			}
			select {
			case <-ctx.Done():
			case <-time.After(10 * time.Second):
				t.Fatal("the signal did not end the context")
			}
			cause := context.Cause(ctx)
			if got := fmt.Sprintf("the prompt was acknowledged (receipt rc-1), then %v before its turn settled", cause); got != tc.want {
				t.Fatalf("got  %q\nwant %q", got, tc.want)
			}
			if !errors.Is(cause, context.Canceled) {
				t.Fatalf("cause %v is not context.Canceled", cause)
			}
		})
	}
}
