package units

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/coreos/go-systemd/v22/unit"
)

// EnginePattern matches every engine scope (scopes.UnitName names them
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

// EngineScopes lists the engine scopes of the user manager that are alive,
// sorted by name. A scope is never a conversation's socket or service: it
// outlives both when they are stopped, so removing a conversation or the
// units must look at scopes too.
func EngineScopes(ctx context.Context) ([]EngineScope, error) {
	c, err := connect(ctx)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	us, err := c.ListUnitsByPatternsContext(ctx, nil, []string{EnginePattern})
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", EnginePattern, err)
	}
	var out []EngineScope
	for _, u := range us {
		s := EngineScope{Name: u.Name, ActiveState: u.ActiveState, SubState: u.SubState}
		s.Conversation, s.Execution, _ = ParseEngineScope(u.Name)
		if s.Alive() {
			out = append(out, s)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// ParseEngineScope returns the conversation and execution an engine scope's
// name carries; ok is false for a name scopes.UnitName cannot have made.
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
