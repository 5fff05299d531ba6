package pi

import (
	"bytes"
	"encoding/json"
	"slices"
)

// Entries as Pi announced them when it appended them (Entries.Announced).
//
// Pi appends an entry's line and writes the event that announces it in
// one synchronous step, serialising the same objects twice, and the event
// reaches the reader before the answer to any get_entries asked after
// the line was read. What it returns from get_entries later is the
// objects as they are then, and three kinds of entry hold objects an
// extension keeps and may change:
//   - the data of its appendEntry (a state object saved twice, changed
//     in between, as the examples' snake.ts does), announced by
//     entry_appended with the entry itself;
//   - the details of its tool's result (a todo list whose items the next
//     call toggles, as todo.ts does), announced by the message_end of the
//     toolResult message the entry wraps, named by its tool call and
//     timestamp;
//   - the details of a message it sends (sendMessage: a status it keeps
//     counting in), announced by the message_end of the custom message,
//     which names no entry: every announcement of the same custom type
//     and content is one the entry may have been written as.
//
// For those the session watch accepts the line as announced besides the
// entry as Pi holds it now. A line a writer edited matches none, except
// that a custom message's line may carry the details of another message
// of its type and content that Pi announced: no event names the entry a
// custom message became, so the newest few of them (maxNoteWays, each
// details once) are all the ways it may have been written.

// maxAnnounced, maxAnnouncedNotes and maxAnnouncedEntry bound what a Conn
// keeps of the announcements (10 MiB): the session watch needs one only
// until its next poll, and a larger or older one is compared as
// get_entries returns it.
const (
	maxAnnounced      = 128
	maxAnnouncedNotes = 32
	maxAnnouncedEntry = 64 << 10
)

// maxNoteWays bounds the ways one custom_message entry may have been
// written (announcedAs): each is a copy of the entry, so a poll's answer
// grows at most that many times over.
const maxNoteWays = 4

// entryKey and toolResultKey name an announcement: an entry by its id, a
// tool result by its tool call and its timestamp (a model may reuse call
// ids across turns; the message's timestamp is Pi's, in milliseconds).
func entryKey(id string) string { return "entry\x00" + id }
func toolResultKey(call string, ts json.Number) string {
	return "tool\x00" + call + "\x00" + string(ts)
}

// note is a custom message as Pi announced it: its type and content name
// the custom_message entries it may be, its details what they were.
type note struct {
	kind    string
	content json.RawMessage
	details json.RawMessage // nil when it had none
}

// entryName is the part of an entry that names it: its id and type, the
// message of a message entry, the custom type and content of a
// custom_message entry.
type entryName struct {
	ID         string          `json:"id"`
	Type       string          `json:"type"`
	Message    *messageName    `json:"message"`
	CustomType string          `json:"customType"`
	Content    json.RawMessage `json:"content"`
}

// messageName is the part of a message that names it: a tool result by
// its tool call and timestamp (a number; the entry's own timestamp is a
// string), a custom message by its type and content.
type messageName struct {
	Role       string          `json:"role"`
	Call       string          `json:"toolCallId"`
	Stamp      json.Number     `json:"timestamp"`
	CustomType string          `json:"customType"`
	Content    json.RawMessage `json:"content"`
	Details    json.RawMessage `json:"details"`
}

// announce keeps what n announces, whole and small enough: the entry of
// an entry_appended, the message of a toolResult's or a custom message's
// message_end. c.mu held.
func (c *Conn) announce(n *native) {
	raw := n.Entry
	if n.Type == "message_end" {
		raw = n.Message
	}
	if n.clip != nil || len(raw) == 0 || len(raw) > maxAnnouncedEntry {
		return
	}
	switch n.Type {
	case "entry_appended":
		var a entryName
		if json.Unmarshal(raw, &a) != nil || a.ID == "" {
			return
		}
		c.putAnnounced(entryKey(a.ID), raw)
	case "message_end":
		var a messageName
		if json.Unmarshal(raw, &a) != nil {
			return
		}
		switch {
		case a.Role == "toolResult" && a.Call != "" && a.Stamp != "":
			c.putAnnounced(toolResultKey(a.Call, a.Stamp), raw)
		case a.Role == "custom" && a.CustomType != "":
			if len(c.notes) == maxAnnouncedNotes {
				c.notes = append(c.notes[:0], c.notes[1:]...)
			}
			c.notes = append(c.notes, note{kind: a.CustomType, content: clone(a.Content), details: clone(a.Details)})
		}
	}
}

// putAnnounced keeps raw as what key names, unless key already names
// another announcement: two tool results of one call in the same
// millisecond (a model that repeats a call id in one turn, results
// made at once), or an id announced twice. Either may be the entry, and
// taking one for the other would vouch for a line holding the other
// entry's words; key then names none (nil), and the entry is compared
// as Pi holds it now.
func (c *Conn) putAnnounced(key string, raw json.RawMessage) {
	if was, ok := c.announced.Get(key); ok && !bytes.Equal(was, raw) {
		raw = nil
	}
	c.announced.Put(key, clone(raw))
}

func clone(b json.RawMessage) json.RawMessage {
	if b == nil {
		return nil
	}
	return append(json.RawMessage(nil), b...)
}

// announcedAs returns the entry raw (one of get_entries' answer) as Pi
// may have announced it: the announced entry itself, raw with its
// message replaced by the announced tool result, or raw with the details
// of each announced custom message of its type and content. c.mu held.
func (c *Conn) announcedAs(raw json.RawMessage) []json.RawMessage {
	var a entryName
	if json.Unmarshal(raw, &a) != nil {
		return nil
	}
	if e, ok := c.announced.Get(entryKey(a.ID)); ok {
		if e == nil {
			return nil // ambiguous (putAnnounced)
		}
		return []json.RawMessage{e}
	}
	switch {
	case a.Type == "message" && a.Message != nil && a.Message.Role == "toolResult":
		msg, ok := c.announced.Get(toolResultKey(a.Message.Call, a.Message.Stamp))
		if !ok || msg == nil {
			return nil
		}
		if e := withField(raw, "message", msg); e != nil {
			return []json.RawMessage{e}
		}
	case a.Type == "custom_message" && a.CustomType != "":
		var out []json.RawMessage
		var seen []json.RawMessage
		for i := len(c.notes) - 1; i >= 0 && len(out) < maxNoteWays; i-- {
			n := c.notes[i]
			if n.kind != a.CustomType || !bytes.Equal(n.content, a.Content) ||
				slices.ContainsFunc(seen, func(d json.RawMessage) bool { return bytes.Equal(d, n.details) }) {
				continue
			}
			seen = append(seen, n.details)
			if e := withField(raw, "details", n.details); e != nil {
				out = append(out, e)
			}
		}
		return out
	}
	return nil
}

// withField is the JSON object raw with field set to v (removed when v
// is nil), or nil if raw is no object.
func withField(raw json.RawMessage, field string, v json.RawMessage) json.RawMessage {
	var obj map[string]json.RawMessage
	if json.Unmarshal(raw, &obj) != nil || obj == nil {
		return nil
	}
	if v == nil {
		delete(obj, field)
	} else {
		obj[field] = v
	}
	out, err := json.Marshal(obj)
	if err != nil {
		return nil
	}
	return out
}
