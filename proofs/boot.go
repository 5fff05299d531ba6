package proofs

import (
	"errors"
	"fmt"
	"time"
)

// BootProof is the evidence that an execution recorded under one boot id is
// gone because the host has booted since: no process survives a reboot.
type BootProof struct {
	Type           string `json:"type"`
	Version        int    `json:"version"`
	Conversation   string `json:"conversation"`
	Execution      string `json:"execution"`
	RecordedBootID string `json:"recorded_boot_id"`
	CurrentBootID  string `json:"current_boot_id"`
	ObservedWall   string `json:"observed_wall"`
	Digest         string `json:"digest,omitempty"`
}

// NewBootProof builds a boot proof for an execution recorded under
// recorded while the host now reports current. It refuses when the two are
// equal or either is not a boot id: then the execution may still be alive.
func NewBootProof(conversation, execution, recorded, current string, observed time.Time) (*BootProof, error) {
	p := &BootProof{
		Type:           TypeBoot,
		Version:        Version,
		Conversation:   conversation,
		Execution:      execution,
		RecordedBootID: recorded,
		CurrentBootID:  current,
		ObservedWall:   formatWall(observed),
	}
	var cs checks
	checkBoot(&cs, p)
	var errs []error
	for _, c := range cs {
		if !c.OK {
			errs = append(errs, fmt.Errorf("%s: %s: %w", c.Name, c.Detail, c.err))
		}
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("no boot proof for execution %q: %w", execution, errors.Join(errs...))
	}
	d, err := digest(p)
	if err != nil {
		return nil, err
	}
	p.Digest = d
	return p, nil
}

func checkBoot(cs *checks, p *BootProof) {
	cs.add("type", p.Type == TypeBoot && p.Version == Version, ErrMalformed,
		"type %q version %d", p.Type, p.Version)
	cs.add("identity", p.Conversation != "" && p.Execution != "", ErrMalformed,
		"conversation %q execution %q", p.Conversation, p.Execution)
	cs.add("boot-id", ValidBootID(p.RecordedBootID) && ValidBootID(p.CurrentBootID), ErrMalformed,
		"recorded %q and current %q are lowercase UUIDs", p.RecordedBootID, p.CurrentBootID)
	cs.add("boot-differs", p.RecordedBootID != p.CurrentBootID, ErrSameBoot,
		"recorded boot differs from the boot current when observed")
}
