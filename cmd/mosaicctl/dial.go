package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"

	"github.com/mosaic-agents/mosaic/conversations"
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
		return "", err
	}
	fmt.Fprintf(os.Stderr, "mosaicctl: started %s\n", units.SocketUnit(id))
	return path, nil
}

// dialHint is what a failed connect adds to its error.
func dialHint(id string) string {
	return fmt.Sprintf("is %s started? systemctl --user start %s; if it is, `systemctl --user status %s` says why its controller ended, "+
		"and `mosaicctl doctor` whether the controllers see what this mosaicctl does", units.SocketUnit(id), units.SocketUnit(id), units.ServiceUnit(id))
}
