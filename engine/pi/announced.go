package pi

import (
	"encoding/json"
)

// Entries as Pi announced them when it appended them (Entries.Announced).
//
// Pi appends an entry's line and writes the event that announces it in
// one synchronous step, serialising the same object twice, and the event
// reaches the reader before the answer to any get_entries asked after
// the line was read. What it returns from get_entries later is the
// object as it is then, and two kinds of entry hold objects an extension
// keeps and may change: the data of its appendEntry (a state object
// saved twice, changed in between, as the examples' snake.ts does;
// announced by entry_appended) and the details of its tool's result (a
// todo list whose items the next call toggles, as todo.ts does;
// announced by the message_end of the toolResult message, which the
// entry wraps). For those the session watch accepts the line as
// announced besides the entry as Pi holds it now; a line a writer edited
// still matches neither.

// maxAnnounced and maxAnnouncedEntry bound what a Conn keeps of the
// announcements (8 MiB): the session watch needs one only until its next
// poll, and a larger or older one is compared as get_entries returns it.
const (
	maxAnnounced      = 128
	maxAnnouncedEntry = 64 << 10
)

// entryKey and toolResultKey name an announcement: an entry by its id, a
// tool result by its tool call and its timestamp (a model may reuse call
// ids across turns; the message's timestamp is Pi's, in milliseconds).
func entryKey(id string) string { return "entry\x00" + id }
func toolResultKey(call string, ts json.Number) string {
	return "tool\x00" + call + "\x00" + string(ts)
}

// entryName is the part of an entry that names it, and of its message
// (a message entry) the part that names a tool result.
type entryName struct {
	ID      string       `json:"id"`
	Type    string       `json:"type"`
	Message *messageName `json:"message"`
}

// messageName names a tool result: its tool call and its timestamp (a
// number; the entry's own timestamp is a string).
type messageName struct {
	Role  string      `json:"role"`
	Call  string      `json:"toolCallId"`
	Stamp json.Number `json:"timestamp"`
}

// announce keeps what n announces, whole and small enough: the entry of
// an entry_appended, the message of a toolResult's message_end. c.mu
// held.
func (c *Conn) announce(n *native) {
	raw := n.Entry
	if n.Type == "message_end" {
		raw = n.Message
	}
	if n.clip != nil || len(raw) == 0 || len(raw) > maxAnnouncedEntry {
		return
	}
	var key string
	switch n.Type {
	case "entry_appended":
		var a entryName
		if json.Unmarshal(raw, &a) != nil || a.ID == "" {
			return
		}
		key = entryKey(a.ID)
	case "message_end":
		var a messageName
		if json.Unmarshal(raw, &a) != nil || a.Role != "toolResult" || a.Call == "" || a.Stamp == "" {
			return
		}
		key = toolResultKey(a.Call, a.Stamp)
	default:
		return
	}
	c.announced.Put(key, append(json.RawMessage(nil), raw...))
}

// announcedAs returns the entry raw (one of get_entries' answer) as Pi
// announced it, or nil: the announced entry itself, or raw with its
// message replaced by the announced tool result. c.mu held.
func (c *Conn) announcedAs(raw json.RawMessage) json.RawMessage {
	var a entryName
	if json.Unmarshal(raw, &a) != nil {
		return nil
	}
	if e, ok := c.announced.Get(entryKey(a.ID)); ok {
		return e
	}
	m := a.Message
	if a.Type != "message" || m == nil || m.Role != "toolResult" {
		return nil
	}
	msg, ok := c.announced.Get(toolResultKey(m.Call, m.Stamp))
	if !ok {
		return nil
	}
	var entry map[string]json.RawMessage
	if json.Unmarshal(raw, &entry) != nil {
		return nil
	}
	entry["message"] = msg
	out, err := json.Marshal(entry)
	if err != nil {
		return nil
	}
	return out
}
