package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	sd "github.com/coreos/go-systemd/v22/dbus"
	"github.com/mosaic-agents/mosaic/claims"
	"github.com/mosaic-agents/mosaic/client"
	"github.com/mosaic-agents/mosaic/conversations"
	"github.com/mosaic-agents/mosaic/internal/userbus"
	"github.com/mosaic-agents/mosaic/protocol"
	"github.com/mosaic-agents/mosaic/scopes"
	"github.com/mosaic-agents/mosaic/units"
	"github.com/urfave/cli/v2"
)

// convStatus is one conversation as `mosaicctl status --json` prints it: unit
// states read from the user manager over D-Bus, the writer claim read from
// the claim store, and the live binding of a controller that was already
// running (nil otherwise: status never starts a controller to ask it).
type convStatus struct {
	Conversation string     `json:"conversation"`
	Socket       unitStatus `json:"socket"`
	Service      unitStatus `json:"service"`
	// Scope is the engine scope of the live binding's execution, or of the
	// claim's execution when no controller runs; nil when neither names one.
	Scope *unitStatus `json:"scope"`
	// Claim is the latest claim revision on the conversation's seat key.
	Claim *claimStatus `json:"claim"`
	// Generation is the controller generation, known only from a
	// controller that was running; nil otherwise.
	Generation *int64            `json:"generation"`
	Binding    *protocol.Binding `json:"binding"`
	// LastStop is the live binding's latest stop record id.
	LastStop string `json:"lastStop,omitempty"`
	// IdleStop is the conversation's idle policy (`conv add --idle-stop`),
	// empty when off.
	IdleStop string `json:"idleStop,omitempty"`
	// StartLimit says systemd holds the units failed on a start limit
	// (units.StartLimited): nothing starts the controller until reset.
	StartLimit bool     `json:"startLimit,omitempty"`
	Errors     []string `json:"errors,omitempty"`
}

// unitStatus is a systemd unit's state.
type unitStatus struct {
	Name        string `json:"name"`
	LoadState   string `json:"loadState"`
	ActiveState string `json:"activeState"`
	SubState    string `json:"subState"`
	MainPID     uint32 `json:"mainPid,omitempty"`
	Path        string `json:"path,omitempty"` // the socket's path
}

// claimStatus is the public part of a claim revision.
type claimStatus struct {
	State        claims.State `json:"state"`
	Conversation string       `json:"conversation"`
	Execution    string       `json:"execution"`
	Revision     uint64       `json:"revision"`
	Reason       string       `json:"reason,omitempty"`
	ProofType    string       `json:"proofType,omitempty"`
	ProofDigest  string       `json:"proofDigest,omitempty"`
	// Proven is true for a stopped claim whose proof verifies: only that
	// frees the keys.
	Proven bool `json:"proven"`
}

func statusCommand() *cli.Command {
	return &cli.Command{
		Name:      "status",
		Usage:     "list conversations: socket, controller, engine scope, claim, generation and last stop",
		ArgsUsage: "[ID]",
		Description: "Reads systemd over D-Bus and the claim store. The generation and the last stop come from a\n" +
			"controller that is already running; status never socket-activates one just to ask.",
		Flags: []cli.Flag{
			&cli.BoolFlag{Name: "json", Usage: "print one JSON object per conversation"},
			&cli.StringFlag{Name: "claim-root", Usage: "writer-claim `DIR` (default $XDG_STATE_HOME/mosaic/claims)"},
		},
		Action: runStatus,
	}
}

func runStatus(c *cli.Context) error {
	if c.NArg() > 1 {
		return usageError("`mosaicctl status` wants at most one conversation id, got %d arguments", c.NArg())
	}
	if id := c.Args().First(); id != "" && !conversations.ValidID(id) {
		return notAnID(id)
	}
	convs, err := statusConversations(c.Args().First())
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(c.Context, time.Minute)
	defer cancel()
	list := make([]*convStatus, len(convs))
	for i, cv := range convs {
		list[i] = &convStatus{Conversation: cv.ID, IdleStop: cv.IdleStop,
			Socket: unitStatus{Name: units.SocketUnit(cv.ID)}, Service: unitStatus{Name: units.ServiceUnit(cv.ID)}}
		list[i].Socket.Path, _ = units.SocketPath(cv.ID)
		readClaim(ctx, c.String("claim-root"), cv, list[i])
	}
	// Units first: only a controller found running is asked for its binding.
	if err := unitStates(ctx, list); err != nil {
		return err
	}
	for _, st := range list {
		if st.Service.ActiveState == "active" {
			liveBinding(ctx, st)
		}
		if st.Socket.ActiveState == "failed" || st.Service.ActiveState == "failed" {
			st.StartLimit, _ = units.StartLimited(ctx, st.Conversation)
		}
	}
	if err := scopeStates(ctx, list); err != nil {
		return err
	}
	var unseen []unseenScope
	if c.NArg() == 0 {
		if unseen, err = unseenScopes(ctx, list); err != nil {
			return err
		}
	}
	if c.Bool("json") {
		enc := json.NewEncoder(os.Stdout)
		for _, st := range list {
			if err := enc.Encode(st); err != nil {
				return err
			}
		}
		for _, u := range unseen {
			if err := enc.Encode(u); err != nil {
				return err
			}
		}
		return nil
	}
	if err := printStatus(list); err != nil {
		return err
	}
	return printUnseen(unseen)
}

// statusConversations loads one conversation or every one; a file that
// does not load is reported and skipped, as `conv list` does.
func statusConversations(id string) ([]*conversations.Conversation, error) {
	s, err := conversations.Open()
	if err != nil {
		return nil, err
	}
	if id != "" {
		cv, err := s.Load(id)
		if err != nil {
			return nil, err
		}
		return []*conversations.Conversation{cv}, nil
	}
	list, bad, err := s.List()
	if err != nil {
		return nil, err
	}
	reportUnloadable(bad)
	return list, nil
}

// readClaim reads the claim on the conversation's seat key into st.
func readClaim(ctx context.Context, root string, cv *conversations.Conversation, st *convStatus) {
	r, err := seatClaim(ctx, root, cv)
	if err != nil {
		st.Errors = append(st.Errors, err.Error())
		return
	}
	if r == nil {
		return
	}
	cs := &claimStatus{State: r.State, Conversation: r.Conversation, Execution: r.Execution,
		Revision: r.Revision, Reason: r.Reason, Proven: r.State == claims.Stopped && claims.Proven(r) == nil}
	if r.Proof != nil {
		cs.ProofType, cs.ProofDigest = r.Proof.Type, r.Proof.Digest
	}
	st.Claim = cs
}

// seatClaim reads the claim on the conversation's seat key (root "" is
// the default root), which always holds a claim's latest revision, or nil
// when there is none. Reading settles the keys as every reader does; a
// root that does not exist yet is no claim, and is not created.
func seatClaim(ctx context.Context, root string, cv *conversations.Conversation) (*claims.Record, error) {
	if root == "" {
		r, err := claims.DefaultRoot()
		if err != nil {
			return nil, err
		}
		root = r
	}
	if _, err := os.Stat(root); errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	store, err := claims.Open(root)
	if err != nil {
		return nil, err
	}
	// The session key only decides which session directory is read
	// alongside; the seat key's claim is settled against its own session.
	keys := claims.Keys{Seat: claims.SeatKey{Seat: cv.Seat, Project: cv.Project, Workspace: cv.Workspace},
		Session: "new:" + cv.ID}
	cur, err := store.Current(ctx, keys)
	if err != nil {
		return nil, fmt.Errorf("claim: %w", err)
	}
	return cur.Seat, nil
}

// unitStates reads the socket and service units of every conversation in
// one call, and the main pid of each running controller.
func unitStates(ctx context.Context, list []*convStatus) error {
	var names []string
	for _, st := range list {
		names = append(names, st.Socket.Name, st.Service.Name)
	}
	return userbus.Default().Do(ctx, func(conn *sd.Conn) error {
		got, err := listUnits(ctx, conn, names)
		if err != nil {
			return err
		}
		for _, st := range list {
			fill(&st.Socket, got)
			fill(&st.Service, got)
			if st.Service.ActiveState == "active" || st.Service.ActiveState == "deactivating" {
				if p, err := conn.GetServicePropertyContext(ctx, st.Service.Name, "MainPID"); err == nil {
					st.Service.MainPID, _ = p.Value.Value().(uint32)
				}
			}
		}
		return nil
	})
}

// scopeStates names each conversation's engine scope (from the live
// binding, else from the claim) and reads its state.
func scopeStates(ctx context.Context, list []*convStatus) error {
	var names []string
	for _, st := range list {
		name := ""
		switch {
		case st.Binding != nil && st.Binding.Scope != "":
			name = st.Binding.Scope
		case st.Claim != nil && st.Claim.Conversation == st.Conversation && st.Claim.Execution != "":
			name, _ = scopes.UnitName(st.Conversation, st.Claim.Execution)
		}
		if name != "" {
			st.Scope = &unitStatus{Name: name}
			names = append(names, name)
		}
	}
	if len(names) == 0 {
		return nil
	}
	return userbus.Default().Do(ctx, func(conn *sd.Conn) error {
		got, err := listUnits(ctx, conn, names)
		if err != nil {
			return err
		}
		for _, st := range list {
			if st.Scope != nil {
				fill(st.Scope, got)
			}
		}
		return nil
	})
}

func listUnits(ctx context.Context, conn *sd.Conn, names []string) (map[string]sd.UnitStatus, error) {
	us, err := conn.ListUnitsByNamesContext(ctx, names)
	if err != nil {
		return nil, fmt.Errorf("read unit states from the user manager: %w", err)
	}
	got := make(map[string]sd.UnitStatus, len(us))
	for _, u := range us {
		got[u.Name] = u
	}
	return got, nil
}

func fill(u *unitStatus, got map[string]sd.UnitStatus) {
	s, ok := got[u.Name]
	if !ok {
		u.LoadState, u.ActiveState = "not-found", "inactive"
		return
	}
	u.LoadState, u.ActiveState, u.SubState = s.LoadState, s.ActiveState, s.SubState
}

// liveBinding asks a running controller for its binding, as an observer.
// A controller that stopped in between would be started again by the
// connect: the window is the time between the D-Bus read and the dial.
func liveBinding(ctx context.Context, st *convStatus) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	c, err := client.Dial(ctx, st.Socket.Path, client.Options{Name: "mosaicctl status"})
	if err != nil {
		st.Errors = append(st.Errors, fmt.Sprintf("controller: %v", err))
		return
	}
	defer c.Close()
	if _, err := awaitBinding(ctx, c); err != nil && !c.State().Bound {
		st.Errors = append(st.Errors, fmt.Sprintf("controller: %v", err))
		return
	}
	b := c.State().Binding
	st.Binding = b
	st.Generation = &b.Generation
	st.LastStop = b.LastStop
}

// printStatus prints the table: one row per conversation.
func printStatus(list []*convStatus) error {
	w := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "ID\tSOCKET\tCONTROLLER\tENGINE\tCLAIM\tGEN\tLAST STOP")
	for _, st := range list {
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", st.Conversation, st.Socket.ActiveState,
			controllerCell(st), engineCell(st), claimCell(st), genCell(st), lastStopCell(st))
	}
	if err := w.Flush(); err != nil {
		return err
	}
	for _, st := range list {
		if st.IdleStop != "" {
			fmt.Printf("%s: hibernates after %s idle (the next client wakes it)\n", st.Conversation, st.IdleStop)
		}
	}
	for _, st := range list {
		if st.Binding != nil && st.Binding.Unconfined != "" {
			fmt.Printf("%s: the engine runs UNCONFINED, so its tools can leave the cohort and no stop of it can be proven: %s (`mosaicctl doctor` checks confinement)\n", st.Conversation, st.Binding.Unconfined)
		}
	}
	for _, st := range list {
		if st.StartLimit {
			fmt.Printf("%s: %s; %s\n", st.Conversation, startLimitText(st.Conversation), startLimitFix(st.Conversation))
		}
	}
	for _, st := range list {
		if st.Binding != nil && st.Binding.EngineEnd != nil {
			fmt.Printf("%s: %s\n", st.Conversation, engineEndText(st.Binding.EngineEnd))
		}
	}
	for _, st := range list {
		for _, e := range st.Errors {
			fmt.Fprintf(os.Stderr, "mosaicctl: %s: %s\n", st.Conversation, e)
		}
	}
	return nil
}

func controllerCell(st *convStatus) string {
	s := st.Service.ActiveState
	if st.Service.MainPID != 0 {
		s += fmt.Sprintf(" (pid %d)", st.Service.MainPID)
	}
	return s
}

func engineCell(st *convStatus) string {
	if st.Scope == nil {
		// Neither a running controller nor the conversation's claim
		// names an execution: nothing was launched for it yet, or its
		// seat is another conversation's.
		return "none"
	}
	exec := ""
	if st.Binding != nil && st.Binding.Execution != "" {
		exec = st.Binding.Execution
	} else if st.Claim != nil {
		exec = st.Claim.Execution
	}
	state := st.Scope.ActiveState
	if st.Scope.LoadState == "not-found" {
		state = "gone"
	}
	s := exec + " " + state
	if st.Binding != nil && st.Binding.EngineState != "" {
		s += "/" + st.Binding.EngineState
	}
	return s
}

func claimCell(st *convStatus) string {
	cl := st.Claim
	switch {
	case cl == nil:
		return "none"
	case cl.Conversation != st.Conversation && cl.Proven:
		// A proven stop frees the seat: the controller launches past it
		// (it never follows another conversation's claim).
		return fmt.Sprintf("none (seat free; %s's claim stopped)", cl.Conversation)
	case cl.Conversation != st.Conversation:
		return fmt.Sprintf("seat held by %s (%s)", cl.Conversation, cl.State)
	case cl.State == claims.Stopped && cl.Proven && cl.ProofType == claims.ProofWithdrawn:
		// Nothing was enumerated or killed: the launch recorded no
		// incarnation and its scope was seen dead (`audit` says what).
		return "stopped (launch withdrawn, no cohort proof)"
	case cl.State == claims.Stopped && cl.Proven && cl.ProofType == claims.ProofUnlaunched:
		return "stopped (never launched)"
	case cl.State == claims.Stopped && cl.Proven:
		return "stopped (proof)"
	case cl.State == claims.Stopped:
		return "stopped (proof does not verify)"
	}
	return string(cl.State)
}

func genCell(st *convStatus) string {
	if st.Generation == nil {
		return "-" // no running controller to ask
	}
	return fmt.Sprint(*st.Generation)
}

func lastStopCell(st *convStatus) string {
	switch {
	case st.LastStop != "":
		return st.LastStop
	case st.Claim != nil && st.Claim.Conversation == st.Conversation && st.Claim.ProofDigest != "":
		return st.Claim.ProofType + " " + shortDigest(st.Claim.ProofDigest)
	}
	return "-"
}

func shortDigest(d string) string {
	d = strings.TrimPrefix(d, "sha256:")
	if len(d) > 12 {
		return d[:12]
	}
	return d
}
