package pi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/mosaic-agents/mosaic/engine"
)

// Budget is how long a command may take that makes Pi read or write
// about size bytes: the command timeout plus one second per PerSecond
// bytes. Pi answers its first command only once its session is loaded,
// and a large answer takes its time through framing, so one fixed timeout
// is either too short for a large session or too long for a small one.
func Budget(base time.Duration, size int64) time.Duration {
	if base <= 0 {
		base = engine.DefaultCommandTimeout
	}
	return base + time.Duration(size/PerSecond)*time.Second
}

// PerSecond is the throughput Budget assumes: 4 MiB a second, well below
// what pinned Pi loads or writes on a slow machine.
const PerSecond = 4 << 20

// promptCommand is the only shape of prompt the adapter can write. It has
// no streamingBehavior field, so Mosaic input never enters Pi's native
// queues by request (brief §1).
type promptCommand struct {
	Type    string `json:"type"`
	ID      string `json:"id"`
	Message string `json:"message"`
}

// simpleCommand is a command with no arguments.
type simpleCommand struct {
	Type string `json:"type"`
	ID   string `json:"id"`
}

type entriesCommand struct {
	Type  string `json:"type"`
	ID    string `json:"id"`
	Since string `json:"since,omitempty"`
}

// State is the part of get_state the controller reads (rpc.md:185-216).
type State struct {
	SessionFile         string          `json:"sessionFile"`
	SessionID           string          `json:"sessionId"`
	IsStreaming         bool            `json:"isStreaming"`
	IsCompacting        bool            `json:"isCompacting"`
	MessageCount        int             `json:"messageCount"`
	PendingMessageCount int             `json:"pendingMessageCount"`
	ThinkingLevel       string          `json:"thinkingLevel"`
	SteeringMode        string          `json:"steeringMode"`
	FollowUpMode        string          `json:"followUpMode"`
	Model               json.RawMessage `json:"model"`
}

// Tree is get_tree's answer; the tree itself stays raw for the caller.
type Tree struct {
	LeafID string          `json:"leafId"`
	Tree   json.RawMessage `json:"tree"`
}

// Entries is get_entries' answer: entries in append order, raw.
type Entries struct {
	LeafID  string            `json:"leafId"`
	Entries []json.RawMessage `json:"entries"`
	// Cut says, for each of Entries, whether framing cut a long string
	// of it (an answer over the engine's line bound): such an entry is
	// not Pi's as written, only its short fields (id, parent, type) are.
	// Nil when the answer came whole.
	Cut []bool `json:"-"`
	// Announced holds, for each of Entries, the entry as Pi may have
	// announced it when it appended it, or nil (announced.go): an
	// extension's appendEntry (entry_appended), a tool's result and a
	// custom message (message_end). Pi keeps the extension's data and
	// details objects themselves, not copies, so the entry it returns
	// later shows whatever the extension changed in them since: the line
	// as written is one of the announced.
	Announced [][]json.RawMessage `json:"-"`
}

// NativeCommand is one row of get_commands.
type NativeCommand struct {
	Name        string `json:"name"`
	Description string `json:"description,omitempty"`
	Source      string `json:"source"`
	Location    string `json:"location,omitempty"`
	Path        string `json:"path,omitempty"`
}

func simple(cmd string) func(string) any {
	return func(id string) any { return simpleCommand{Type: cmd, ID: id} }
}

// ErrAnswerTooLarge is wrapped when a response was so large that framing
// left elements of it out (strings cut short are still an answer: ids and
// types stay whole).
var ErrAnswerTooLarge = errors.New("engine answer too large to read whole")

// decodeData decodes a response's data into v.
func decodeData(n *native, cmd string, v any) error {
	if n.clip != nil && n.clip.Dropped > 0 {
		return fmt.Errorf("%s: %w (%d bytes; %d elements left out)", cmd, ErrAnswerTooLarge, n.clip.Bytes, n.clip.Dropped)
	}
	if err := json.Unmarshal(n.Data, v); err != nil {
		return fmt.Errorf("%s: decode response data: %w", cmd, err)
	}
	return nil
}

// GetState asks Pi for its session state.
func (c *Conn) GetState(ctx context.Context) (State, error) {
	return c.GetStateWithin(ctx, c.opts.CommandTimeout)
}

// GetStateWithin is GetState waiting at most timeout: the first command
// of an execution waits for Pi to load its session, which takes time in
// proportion to the file (see Budget).
func (c *Conn) GetStateWithin(ctx context.Context, timeout time.Duration) (State, error) {
	var s State
	n, err := c.call(ctx, "get_state", max(timeout, c.opts.CommandTimeout), simple("get_state"))
	if err != nil {
		return s, err
	}
	return s, decodeData(n, "get_state", &s)
}

// GetTree asks Pi for the session tree and its leaf.
func (c *Conn) GetTree(ctx context.Context) (Tree, error) {
	var t Tree
	n, err := c.call(ctx, "get_tree", c.opts.CommandTimeout, simple("get_tree"))
	if err != nil {
		return t, err
	}
	return t, decodeData(n, "get_tree", &t)
}

// GetEntries asks Pi for the session entries after since (all if empty).
// An unknown since is Pi's refusal, a *NativeError.
func (c *Conn) GetEntries(ctx context.Context, since string) (Entries, error) {
	return c.GetEntriesWithin(ctx, since, c.opts.CommandTimeout)
}

// GetEntriesWithin is GetEntries waiting at most timeout. An answer so
// large that framing left entries out fails with ErrAnswerTooLarge; one
// whose long strings were cut is returned (ids, parents and types are
// short and stay whole).
func (c *Conn) GetEntriesWithin(ctx context.Context, since string, timeout time.Duration) (Entries, error) {
	var e Entries
	n, err := c.call(ctx, "get_entries", max(timeout, c.opts.CommandTimeout), func(id string) any {
		return entriesCommand{Type: "get_entries", ID: id, Since: since}
	})
	if err != nil {
		return e, err
	}
	if err := decodeData(n, "get_entries", &e); err != nil {
		return e, err
	}
	if n.clip != nil {
		e.Cut = make([]bool, len(e.Entries))
		for i := range e.Entries {
			e.Cut[i] = n.cut(fmt.Sprintf("/data/entries/%d", i))
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.announced.Len() == 0 && len(c.notes) == 0 {
		return e, nil
	}
	for i, raw := range e.Entries {
		if a := c.announcedAs(raw); a != nil {
			if e.Announced == nil {
				e.Announced = make([][]json.RawMessage, len(e.Entries))
			}
			e.Announced[i] = a
		}
	}
	return e, nil
}

// GetCommands lists the slash commands Pi would run (extensions, prompt
// templates, skills). Under the seal it still lists inline extension
// commands, which is why the slash policy refuses every leading slash.
func (c *Conn) GetCommands(ctx context.Context) ([]NativeCommand, error) {
	var d struct {
		Commands []NativeCommand `json:"commands"`
	}
	n, err := c.call(ctx, "get_commands", c.opts.CommandTimeout, simple("get_commands"))
	if err != nil {
		return nil, err
	}
	return d.Commands, decodeData(n, "get_commands", &d)
}

// ClearQueue empties Pi's steering and follow-up queues and returns what
// they held.
func (c *Conn) ClearQueue(ctx context.Context) (QueueState, error) {
	var q QueueState
	n, err := c.call(ctx, "clear_queue", c.opts.CommandTimeout, simple("clear_queue"))
	if err != nil {
		return q, err
	}
	var d queueData
	if err := decodeData(n, "clear_queue", &d); err != nil {
		return q, err
	}
	return QueueState(d), nil
}

// Abort aborts the current run; Pi answers once idle. Pi then runs any
// message still queued (rpc.md:158), so callers that stop a turn use
// Interrupt, which clears the queue first.
func (c *Conn) Abort(ctx context.Context) error {
	_, err := c.call(ctx, "abort", c.opts.AbortTimeout, simple("abort"))
	return err
}
