package claude

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
)

// Said is the SHA-256 of what one line tells the model on a resume, in a
// canonical JSON form (keys sorted, numbers as written), so the CLI's
// stdout frame and its transcript line of one message compare equal
// whatever order each serialised its keys in. The zero Said is no line's.
type Said [sha256.Size]byte

// MessageSaid is what a user or assistant message says: its role and its
// content. The rest of the message (usage, stop_reason, the stdout
// frame's null stop_reason before the transcript's final one) is the
// CLI's accounting and differs between the two (DIGEST §8, measured on
// every line of transcript_golden.jsonl).
func MessageSaid(raw json.RawMessage) (Said, bool) {
	var m struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	}
	if json.Unmarshal(raw, &m) != nil {
		return Said{}, false
	}
	return canonical(map[string]json.RawMessage{"role": quote(m.Role), "content": m.Content})
}

// SystemSaid is what a system line says: its subtype and its content
// (a local_command's output reaches the model as a user message on a
// resume, measured).
func SystemSaid(subtype string, content json.RawMessage) (Said, bool) {
	return canonical(map[string]json.RawMessage{"subtype": quote(subtype), "content": content})
}

// snapshotLate are the keys of a prompt_snapshot the CLI writes only in
// the one after a process's first reply (transcript_golden.jsonl lines 13
// and 19): not part of what SnapshotSaid compares. A resume was measured
// to take the system prompt from the last snapshot, and neither tools
// nor cliPrefix from it.
var snapshotLate = []string{"tools", "cliPrefix", "systemTurns", "toolChangeHeader", "inlineTools", "keptReminders"}

// SnapshotSaid is what a prompt_snapshot attachment says: the attachment
// without the keys only a later snapshot of a process carries, so the
// CLI's repeat of its snapshot compares equal to the first.
func SnapshotSaid(att json.RawMessage) (Said, bool) {
	var m map[string]json.RawMessage
	if json.Unmarshal(att, &m) != nil || m == nil {
		return Said{}, false
	}
	for _, k := range snapshotLate {
		delete(m, k)
	}
	return canonical(m)
}

// canonical digests m as JSON with sorted keys at every level and
// numbers kept as written; a nil value is JSON null.
func canonical(m map[string]json.RawMessage) (Said, bool) {
	v := make(map[string]any, len(m))
	for k, raw := range m {
		if len(raw) == 0 {
			v[k] = nil
			continue
		}
		d := json.NewDecoder(bytes.NewReader(raw))
		d.UseNumber()
		var x any
		if d.Decode(&x) != nil {
			return Said{}, false
		}
		v[k] = x
	}
	b, err := json.Marshal(v)
	if err != nil {
		return Said{}, false
	}
	return sha256.Sum256(b), true
}

func quote(s string) json.RawMessage {
	b, _ := json.Marshal(s)
	return b
}
