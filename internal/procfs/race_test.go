//go:build race

package procfs

// raceEnabled: the race detector's instrumentation moves buffers to the
// heap that escape analysis keeps on the stack otherwise.
const raceEnabled = true
