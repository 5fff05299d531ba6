package scopes

import (
	"context"
	"fmt"
	"sort"
	"strings"

	sddbus "github.com/coreos/go-systemd/v22/dbus"
	"github.com/coreos/go-systemd/v22/unit"

	"github.com/mosaic-agents/mosaic/internal/userbus"
)

// EnginePattern matches every engine scope (UnitName names them
// mosaic-engine-<conversation>-<execution>.scope, each part escaped as
// systemd-escape does, so the part separator is the only raw '-').
const EnginePattern = "mosaic-engine-*.scope"

// EngineScope is an engine scope the user manager knows, with the
// conversation and execution its name carries.
type EngineScope struct {
	Name         string
	Conversation string // "" when the name does not parse
	Execution    string
	ActiveState  string
	SubState     string
}

// Alive reports whether the scope may still hold processes: any state but
// inactive and failed (a scope that failed has had its processes killed).
func (s EngineScope) Alive() bool { return s.ActiveState != "inactive" && s.ActiveState != "failed" }

// EngineScopes lists the engine scopes of conversation ("" for every
// conversation) that are alive, sorted by name. A scope is never a
// conversation's socket or service: it outlives both when they are
// stopped, so removing a conversation or the units must look at scopes
// too.
func (m *Manager) EngineScopes(ctx context.Context, conversation string) ([]EngineScope, error) {
	return EngineScopesOn(ctx, m.bus.Bus, conversation)
}

// EngineScopesOn is EngineScopes of the manager b reaches.
func EngineScopesOn(ctx context.Context, b *userbus.Bus, conversation string) ([]EngineScope, error) {
	pattern, what := EnginePattern, "every conversation"
	if conversation != "" {
		// systemd matches unit patterns with FNM_NOESCAPE: the "\x2d" of
		// an escaped '-' is matched as written.
		pattern, what = "mosaic-engine-"+unit.UnitNameEscape(conversation)+"-*.scope", conversation
	}
	var out []EngineScope
	err := b.Do(ctx, func(c *sddbus.Conn) error {
		us, err := c.ListUnitsByPatternsContext(ctx, nil, []string{pattern})
		if err != nil {
			return err
		}
		out = out[:0]
		for _, u := range us {
			s := EngineScope{Name: u.Name, ActiveState: u.ActiveState, SubState: u.SubState}
			s.Conversation, s.Execution, _ = ParseEngineScope(u.Name)
			if s.Alive() {
				out = append(out, s)
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list the engine scopes of %s (%s): %w", what, pattern, err)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// ParseEngineScope returns the conversation and execution an engine scope's
// name carries; ok is false for a name UnitName cannot have made.
func ParseEngineScope(name string) (conversation, execution string, ok bool) {
	rest, found := strings.CutPrefix(name, "mosaic-engine-")
	if !found {
		return "", "", false
	}
	rest, found = strings.CutSuffix(rest, ".scope")
	if !found {
		return "", "", false
	}
	conv, exec, found := strings.Cut(rest, "-")
	if !found || conv == "" || exec == "" || strings.Contains(exec, "-") {
		return "", "", false
	}
	return unit.UnitNameUnescape(conv), unit.UnitNameUnescape(exec), true
}
