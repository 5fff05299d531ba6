package main

import (
	"context"
	"fmt"
	"strings"
)

// checkIdlePolicy shows which conversations hibernate when idle (`conv
// add --idle-stop`): their controller and engine end after that long
// without a run, a client, a tool process, a queued item or a pending
// approval, and the next client wakes them on the same leaf.
func checkIdlePolicy(ctx context.Context) (string, error) {
	list, _, err := registered()
	if err != nil {
		return "", err
	}
	var on []string
	for _, cv := range list {
		if cv.IdleStop != "" {
			on = append(on, fmt.Sprintf("%s after %s", cv.ID, cv.IdleStop))
		}
	}
	if len(on) == 0 {
		return fmt.Sprintf("off for all %d conversations (an activated conversation keeps its controller and engine until a stop)", len(list)), nil
	}
	return fmt.Sprintf("%d of %d conversations hibernate when idle: %s", len(on), len(list), strings.Join(on, ", ")), nil
}
