package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"time"

	"github.com/mosaic-agents/mosaic/conversations"
	"github.com/mosaic-agents/mosaic/protocol"
	"github.com/mosaic-agents/mosaic/units"
)

// conversationSocket returns the socket to dial for conversation id:
// override when given (development, tests), else the socket unit's path.
// A registered conversation whose socket unit is not started gets it
// started over D-Bus first, so `attach` and the verbs work right after
// `conv add`; connecting then socket-activates the controller.
func conversationSocket(ctx context.Context, id, override string) (string, error) {
	if override != "" {
		return override, nil
	}
	path, err := units.SocketPath(id)
	if err != nil {
		return "", err
	}
	if _, err := os.Stat(path); !errors.Is(err, fs.ErrNotExist) {
		return path, nil
	}
	store, err := conversations.Open()
	if err != nil {
		return "", err
	}
	if _, err := store.Load(id); err != nil {
		return "", err
	}
	if err := units.StartSocket(ctx, id); err != nil {
		if r := startLimitRefusal(id, err); r != nil {
			return "", r
		}
		return "", err
	}
	fmt.Fprintf(os.Stderr, "mosaicctl: started %s\n", units.SocketUnit(id))
	return path, nil
}

// dialError is the error of a failed connect to conversation id (what
// names the step): the controller's refusal as it is; start-limit-hit
// when systemd holds the conversation's units failed on a start limit,
// which a client meets only as a reset connection; else err with
// dialHint.
func dialError(ctx context.Context, id, what string, err error, limit time.Duration) error {
	if protocol.CodeOf(err) != "" {
		return err
	}
	if r := startLimitRefusal(id, err); r != nil {
		return r
	}
	return fmt.Errorf("%s: %w (%s)", what, err, dialHint(ctx, id, err, limit))
}

// startLimitRefusal returns start-limit-hit, naming the cause's log and
// the reset, when systemd holds conversation id's units failed on a
// start limit (units.StartLimited); nil otherwise, or when the user
// manager cannot say. err is what the client met.
func startLimitRefusal(id string, err error) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if hit, qerr := units.StartLimited(ctx, id); qerr != nil || !hit {
		return nil
	}
	return &protocol.Refusal{Code: protocol.CodeStartLimit, Err: err, Message: fmt.Sprintf("%s (%v); %s", startLimitText(id), err, startLimitFix(id))}
}

// startLimitText says what a start limit did to conversation id.
func startLimitText(id string) string {
	return fmt.Sprintf("systemd stopped starting %s: its controller failed at start too often in a row (the unit's start limit), "+
		"so the socket refuses every client", units.ServiceUnit(id))
}

// startLimitFix names where to read why, and the reset that lets the
// controller start again once the cause is fixed.
func startLimitFix(id string) string {
	svc, sock := units.ServiceUnit(id), units.SocketUnit(id)
	return fmt.Sprintf("`journalctl --user -u %s -n 30` says why it failed; once that is fixed: `systemctl --user reset-failed %s %s`", svc, svc, sock)
}

// dialHint is what a failed connect adds to its error. A connect that ran
// out of time found a socket that did not answer quickly enough, not a
// missing one: it names the --timeout that passed (ctx's cause) or the
// verb's own limit on the connect, and the controller's status; any other
// failure (no socket, refused) asks whether the socket unit is started.
func dialHint(ctx context.Context, id string, err error, limit time.Duration) string {
	if !isTimeout(err) {
		return fmt.Sprintf("is %s started? systemctl --user start %s; if it is, `systemctl --user status %s` says why its controller ended, "+
			"and `mosaicctl doctor` whether the controllers see what this mosaicctl does", units.SocketUnit(id), units.SocketUnit(id), units.ServiceUnit(id))
	}
	var te timeoutError
	if errors.As(context.Cause(ctx), &te) {
		return fmt.Sprintf("%v before the controller answered: too short, or the controller is slow to start "+
			"(a controller launches its engine before it answers); `systemctl --user status %s` shows it", te, units.ServiceUnit(id))
	}
	return fmt.Sprintf("the controller did not answer within %s: it is slow to start or stuck; `systemctl --user status %s` shows what it does",
		limit, units.ServiceUnit(id))
}

// isTimeout reports whether err is a deadline passing: the dialer's own
// "i/o timeout" or a context's.
func isTimeout(err error) bool {
	var ne net.Error
	return errors.Is(err, context.DeadlineExceeded) || errors.Is(err, os.ErrDeadlineExceeded) ||
		(errors.As(err, &ne) && ne.Timeout())
}
