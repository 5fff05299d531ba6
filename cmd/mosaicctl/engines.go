package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"

	"github.com/mosaic-agents/mosaic/claims"
	"github.com/mosaic-agents/mosaic/conversations"
	"github.com/mosaic-agents/mosaic/protocol"
	"github.com/mosaic-agents/mosaic/scopes"
	"github.com/mosaic-agents/mosaic/units"
)

// refuseLiveEngines refuses when an engine scope of conversation id (of any
// conversation, for id "") is alive, naming each and the command that
// stops it. A user manager that cannot be asked refuses too: an engine
// nobody looked for is not an engine known to be gone.
func refuseLiveEngines(ctx context.Context, id, what string) error {
	live, err := liveEngineScopes(ctx)
	if err != nil {
		return fmt.Errorf("%s: check for running engines: %w", what, err)
	}
	registered := registeredIDs()
	var names, fixes []string
	for _, s := range live {
		if id != "" && s.Conversation != id {
			continue
		}
		names = append(names, fmt.Sprintf("%s (%s/%s)", s.Name, s.ActiveState, s.SubState))
		fixes = append(fixes, stopAdvice(s, registered))
	}
	if len(names) == 0 {
		return nil
	}
	return protocol.Refuse(protocol.CodeEngineAlive, "%s: an engine still runs in %s; stop it first: %s",
		what, strings.Join(names, ", "), strings.Join(dedupe(fixes), ", then "))
}

// liveEngineScopes lists every alive engine scope of the user manager.
func liveEngineScopes(ctx context.Context) ([]scopes.EngineScope, error) {
	m := scopes.NewManager(scopes.Config{})
	defer m.Close()
	return m.EngineScopes(ctx, "")
}

// stopAdvice is how to stop s, as a sentence with the command quoted.
func stopAdvice(s scopes.EngineScope, registered map[string]bool) string {
	cmd := stopCommandFor(s, registered)
	if registered[s.Conversation] {
		return "`" + cmd + "`"
	}
	return "`" + cmd + "` (its conversation is not registered, so no proof is possible)"
}

// stopCommandFor is the command that stops s: a proven force stop through
// its conversation when that is registered, else systemctl (no proof).
func stopCommandFor(s scopes.EngineScope, registered map[string]bool) string {
	if registered[s.Conversation] {
		return "mosaicctl stop --take --yes " + s.Conversation
	}
	return "systemctl --user stop " + s.Name
}

// registeredIDs is the set of registered conversations; a store that does
// not open or list is an empty set (the advice falls back to systemctl).
func registeredIDs() map[string]bool {
	ids := map[string]bool{}
	s, err := conversations.Open()
	if err != nil {
		return ids
	}
	list, bad, err := s.List()
	if err != nil {
		return ids
	}
	for _, cv := range list {
		ids[cv.ID] = true
	}
	for id := range bad {
		ids[id] = true
	}
	return ids
}

func dedupe(ss []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, s := range ss {
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	return out
}

// unseenScope is an alive engine scope that no row of `status` shows: its
// conversation is not registered, or its execution is not the one the
// conversation's binding or claim names. No controller knows it, so no
// force stop can prove it gone; the fix is systemctl's stop of the scope,
// which kills its whole cgroup.
type unseenScope struct {
	Scope        unitStatus `json:"unownedScope"`
	Conversation string     `json:"conversation,omitempty"`
	Execution    string     `json:"execution,omitempty"`
	Registered   bool       `json:"registered"`
	Fix          string     `json:"fix"`
}

// unseenScopes lists the alive engine scopes that list does not show.
func unseenScopes(ctx context.Context, list []*convStatus) ([]unseenScope, error) {
	live, err := liveEngineScopes(ctx)
	if err != nil {
		return nil, err
	}
	shown := map[string]bool{}
	for _, st := range list {
		if st.Scope != nil {
			shown[st.Scope.Name] = true
		}
	}
	registered := registeredIDs()
	var out []unseenScope
	for _, s := range live {
		if shown[s.Name] {
			continue
		}
		out = append(out, unseenScope{
			Scope:        unitStatus{Name: s.Name, LoadState: "loaded", ActiveState: s.ActiveState, SubState: s.SubState},
			Conversation: s.Conversation, Execution: s.Execution, Registered: registered[s.Conversation],
			Fix: "systemctl --user stop " + s.Name,
		})
	}
	return out, nil
}

// printUnseen lists, after the status table, the engine scopes no row
// shows, each with the command that stops it.
func printUnseen(unseen []unseenScope) error {
	if len(unseen) == 0 {
		return nil
	}
	fmt.Println()
	fmt.Println("Engine scopes no registered conversation shows (no controller knows them; stopping one kills its whole cgroup, without a proof):")
	for _, u := range unseen {
		owner := "conversation " + u.Conversation + ", not registered"
		if u.Registered {
			owner = "conversation " + u.Conversation + ", execution " + u.Execution + " (not the one its controller or claim names)"
		}
		if u.Conversation == "" {
			owner = "a name mosaic did not make"
		}
		fmt.Printf("  %s  %s/%s  %s: %s\n", u.Scope.Name, u.Scope.ActiveState, u.Scope.SubState, owner, u.Fix)
	}
	return nil
}

// refuseActiveSocket refuses `conv rm` while the conversation's socket
// unit is active: its file would go while systemd still activates a
// controller for it. Like refuseLiveEngines, a manager that cannot be
// asked refuses too.
func refuseActiveSocket(ctx context.Context, id string) error {
	active, err := units.ActiveSockets(ctx)
	if err != nil {
		return fmt.Errorf("conv rm %s: check for an active socket: %w", id, err)
	}
	for _, u := range active {
		if u == units.SocketUnit(id) {
			return protocol.Refuse(protocol.CodeSocketActive, "conv rm %s: the conversation's socket %s is active; stop it first: `systemctl --user stop %s %s`",
				id, u, u, units.ServiceUnit(id))
		}
	}
	return nil
}

// refuseHeldSeat refuses `conv rm` while the conversation's own claim
// holds its seat unproven (reserved, active, stopping, uncertain, stopped
// without a proof that verifies). Claims are never deleted or rewritten
// (claims/doc.go): only a proof frees one, and only the conversation's
// controller can make it, which needs the conversation's file. Removed,
// the claim would hold the seat for good. A proven stop is free already:
// it stays in the store as history and blocks no other conversation.
// refuseHeldSeatOf is refuseHeldSeat for a conversation whose file does
// not load (loadErr): its claims are found by its id, since the seat key
// is in the file. Removed, nothing could prove that claim's stop, and the
// seat would stay held for every conversation added on it after.
func refuseHeldSeatOf(ctx context.Context, id string, loadErr error) error {
	store, err := existingClaims()
	if store == nil {
		return err
	}
	held, err := store.HeldSeats(ctx, id)
	if err != nil && len(held) == 0 {
		return fmt.Errorf("conv rm %s: read its claims: %w", id, err)
	}
	if len(held) == 0 {
		return nil
	}
	r := held[0]
	return protocol.Refuse(protocol.CodeAlreadyActive, "conv rm %s: its claim (%s) holds seat %s of project %s, and removed, nothing could prove its stop: fix its file, prove the stop (`mosaicctl stop --take --yes %s`), then remove it; the file: %v",
		id, r.State, r.Seat.Seat, r.Seat.Project, id, loadErr)
}

// existingClaims opens the user's claim store, or returns nil with no
// error where there is none yet (nothing was ever launched).
func existingClaims() (*claims.Store, error) {
	root, err := claims.DefaultRoot()
	if err != nil {
		return nil, err
	}
	if _, err := os.Stat(root); errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	return claims.Open(root)
}

func refuseHeldSeat(ctx context.Context, cv *conversations.Conversation) error {
	store, err := existingClaims()
	if store == nil {
		return err
	}
	keys := claims.Keys{Seat: claims.SeatKey{Seat: cv.Seat, Project: cv.Project, Workspace: cv.Workspace}, Session: "new:" + cv.ID}
	cur, err := store.Current(ctx, keys)
	if err != nil {
		return fmt.Errorf("conv rm %s: read its claim: %w", cv.ID, err)
	}
	r := cur.Seat
	if r == nil || r.Conversation != cv.ID || claims.Proven(r) == nil {
		return nil
	}
	code := protocol.CodeUnsafeReplacement
	if r.State == claims.Reserved || r.State == claims.Active {
		code = protocol.CodeAlreadyActive
	}
	return protocol.Refuse(code, "conv rm %s: its claim (%s) holds seat %s of project %s, and once removed nothing could prove its stop: prove it first (`mosaicctl stop --take --yes %s`), then stop its units (`systemctl --user stop %s %s`) and remove it",
		cv.ID, r.State, cv.Seat, cv.Project, cv.ID, units.SocketUnit(cv.ID), units.ServiceUnit(cv.ID))
}
