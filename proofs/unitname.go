package proofs

import (
	"errors"
	"fmt"

	"github.com/coreos/go-systemd/v22/unit"
)

// EngineUnit names the transient scope of one execution of a
// conversation's engine: mosaic-engine-<conversation>-<execution>.scope,
// each id escaped as systemd escapes a unit name. A cohort proof's unit
// must be exactly this name of its conversation and execution: the name is
// what ties the proof's identity to the cgroup that was observed (the
// cgroup path ends in the unit), and a proof whose ids were edited to
// another conversation's, its digest recomputed, then names a unit that
// was never observed.
func EngineUnit(conversation, execution string) (string, error) {
	if conversation == "" || execution == "" {
		return "", errors.New("scope name: conversation and execution must not be empty")
	}
	n := "mosaic-engine-" + unit.UnitNameEscape(conversation) + "-" + unit.UnitNameEscape(execution) + ".scope"
	if len(n) > 255 {
		return "", fmt.Errorf("scope name %q is longer than 255 bytes", n)
	}
	return n, nil
}
