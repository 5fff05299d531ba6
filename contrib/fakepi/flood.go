package fakepi

import (
	"context"
	"fmt"
	"strconv"
	"strings"
)

// EnvFlood turns every answer into a flood for the fan-out benchmark:
// FAKEPI_FLOOD=<n> makes each model call stream exactly n text deltas back
// to back, with no pacing, instead of its scripted text (a scripted tool
// call or endless stream is dropped too). Each delta is the wall-clock
// time it was written, in decimal Unix nanoseconds, and a space, so a
// reader can tell how long a delta took to reach it; the final message
// holds all of them, which gives the engine's own write rate.
const EnvFlood = "FAKEPI_FLOOD"

// floodCount reads FAKEPI_FLOOD; unset or 0 is off.
func floodCount(v string) (int, error) {
	if v == "" {
		return 0, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("%s: bad value %q", EnvFlood, v)
	}
	return n, nil
}

// floodText writes text_start and e.flood stamped text_delta updates as
// fast as stdout takes them, stopping early when ctx is aborted. It
// returns the text written and whether the run was aborted.
func (e *engine) floodText(ctx context.Context) (string, bool) {
	var text strings.Builder
	e.mu.Lock()
	e.update(zeroUsage(), obj{{"type", "text_start"}, {"contentIndex", 0}})
	e.mu.Unlock()
	for range e.flood {
		if ctx.Err() != nil {
			return text.String(), true
		}
		// The lock is taken per delta so that stdin commands (abort,
		// get_state) still interleave with the flood.
		e.mu.Lock()
		chunk := strconv.FormatInt(e.now().UnixNano(), 10) + " "
		e.update(zeroUsage(), obj{{"type", "text_delta"}, {"contentIndex", 0}, {"delta", chunk}})
		e.mu.Unlock()
		text.WriteString(chunk)
	}
	return text.String(), false
}
