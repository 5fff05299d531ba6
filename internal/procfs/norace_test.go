//go:build !race

package procfs

const raceEnabled = false
