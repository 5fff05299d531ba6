package fakepi

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// EnvFlood turns every answer into a flood for the fan-out benchmark:
// FAKEPI_FLOOD=<n> makes each model call stream exactly n text deltas back
// to back, with no pacing, instead of its scripted text (a scripted tool
// call or endless stream is dropped too). Each delta is the wall-clock
// time it was written, in decimal Unix nanoseconds, and a space, so a
// reader can tell how long a delta took to reach it; the final message
// holds all of them, which gives the engine's own write rate.
// FAKEPI_FLOOD=<n>@<rate> paces the deltas instead: rate per second, on
// a fixed schedule from the first, so a late delta does not shift the
// ones after it.
const EnvFlood = "FAKEPI_FLOOD"

// floodSpec is FAKEPI_FLOOD: n deltas, every apart (0: unpaced).
type floodSpec struct {
	n     int
	every time.Duration
}

// floodCount reads FAKEPI_FLOOD; unset or 0 is off.
func floodCount(v string) (floodSpec, error) {
	if v == "" {
		return floodSpec{}, nil
	}
	count, rate, paced := strings.Cut(v, "@")
	n, err := strconv.Atoi(count)
	if err != nil || n < 0 {
		return floodSpec{}, fmt.Errorf("%s: bad value %q", EnvFlood, v)
	}
	f := floodSpec{n: n}
	if paced {
		r, err := strconv.Atoi(rate)
		if err != nil || r <= 0 {
			return floodSpec{}, fmt.Errorf("%s: bad rate in %q (want <n>@<deltas per second>)", EnvFlood, v)
		}
		f.every = time.Second / time.Duration(r)
	}
	return f, nil
}

// floodText writes text_start and e.flood stamped text_delta updates as
// fast as stdout takes them, stopping early when ctx is aborted. It
// returns the text written and whether the run was aborted.
func (e *engine) floodText(ctx context.Context) (string, bool) {
	var text strings.Builder
	e.mu.Lock()
	e.update(zeroUsage(), obj{{"type", "text_start"}, {"contentIndex", 0}})
	e.mu.Unlock()
	start := time.Now() // the schedule is real time, whatever e.now says
	for i := range e.flood.n {
		if ctx.Err() != nil {
			return text.String(), true
		}
		if e.flood.every > 0 {
			time.Sleep(time.Until(start.Add(time.Duration(i) * e.flood.every)))
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
