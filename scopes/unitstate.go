package scopes

import (
	"context"
	"fmt"
)

// ScopeState asks the user manager for the state of the scope unit of one
// execution, named as UnitName names it: a unit the manager does not know
// reads LoadState "not-found". Without a user manager it fails: nothing
// was observed.
func (m *Manager) ScopeState(ctx context.Context, conversation, execution string) (string, UnitState, error) {
	name, err := UnitName(conversation, execution)
	if err != nil {
		return "", UnitState{}, err
	}
	st, err := m.bus.unitState(ctx, name)
	if err != nil {
		return name, UnitState{}, fmt.Errorf("read the state of %s: %w", name, err)
	}
	return name, st, nil
}
