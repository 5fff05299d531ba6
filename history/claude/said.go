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
// every line of transcript_golden.jsonl). A content that is a string says
// what one text block of it says, as the Messages API reads it: the CLI
// announces its compaction summary as one text block and writes it as a
// string (engine/claude/testdata/compact).
func MessageSaid(raw json.RawMessage) (Said, bool) {
	var m struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	}
	if json.Unmarshal(raw, &m) != nil {
		return Said{}, false
	}
	if c := bytes.TrimLeft(m.Content, " \t\r\n"); len(c) > 0 && c[0] == '"' {
		var text string
		if json.Unmarshal(c, &text) != nil {
			return Said{}, false
		}
		m.Content, _ = json.Marshal([]map[string]string{{"type": "text", "text": text}})
	}
	return canonical(map[string]json.RawMessage{"role": quote(m.Role), "content": m.Content})
}

// NotificationSaid is what the user line the CLI writes when a
// run_in_background task ends while it is idle says: a message whose
// content is the task-notification its system task_notification frame
// announced, field by field (engine/claude/testdata/background, measured:
// the frame carries another uuid than the line, so only the words tie
// them).
func NotificationSaid(taskID, toolUseID, outputFile, status, summary string) Said {
	text := "<task-notification>\n<task-id>" + taskID + "</task-id>\n<tool-use-id>" + toolUseID +
		"</tool-use-id>\n<output-file>" + outputFile + "</output-file>\n<status>" + status +
		"</status>\n<summary>" + summary + "</summary>\n</task-notification>"
	raw, _ := json.Marshal(map[string]string{"role": "user", "content": text})
	said, _ := MessageSaid(raw)
	return said
}

// CompactContent is the content of every compact_boundary line the CLI
// writes; its stdout frame carries none.
const CompactContent = "Conversation compacted"

// preserved is what a compact_boundary says of the lines before it that
// the CLI carries past the compaction (the preserved segment, which a
// resume relinks after the summary: measured, the resumed request held
// the summary, then the preserved head and tail), under either casing:
// the stdout frame's snake_case or the transcript's camelCase.
type preserved struct {
	Segment  preservedSegment  `json:"segment"`
	Messages preservedMessages `json:"messages"`
}

// preservedSegment and preservedMessages are a boundary's two parts as
// digested. Each casing decodes into a struct of the same fields under
// its own tags, converted to these (a conversion ignores tags).
type preservedSegment struct {
	Head   string `json:"head"`
	Anchor string `json:"anchor"`
	Tail   string `json:"tail"`
}

type preservedMessages struct {
	Anchor string   `json:"anchor"`
	UUIDs  []string `json:"uuids"`
	All    []string `json:"all"`
}

// boundarySaid digests a compact_boundary: its subtype, content, logical
// parent (the last line before it) and what it preserves.
func boundarySaid(content, logicalParent string, p preserved) (Said, bool) {
	b, err := json.Marshal(p)
	if err != nil {
		return Said{}, false
	}
	return canonical(map[string]json.RawMessage{"subtype": quote("compact_boundary"), "content": quote(content),
		"logicalParent": quote(logicalParent), "preserved": b})
}

// BoundarySaid is what a compact_boundary line of the transcript says:
// its content, logicalParentUuid and compactMetadata's preservedSegment
// and preservedMessages. The rest of compactMetadata (trigger, token
// counts, timings, runningTurnSends) is the CLI's accounting: only the
// line carries it. ok is false when content is not a string.
func BoundarySaid(content json.RawMessage, logicalParent string, meta json.RawMessage) (Said, bool) {
	var text string
	var m struct {
		Segment *struct {
			Head   string `json:"headUuid"`
			Anchor string `json:"anchorUuid"`
			Tail   string `json:"tailUuid"`
		} `json:"preservedSegment"`
		Messages *struct {
			Anchor string   `json:"anchorUuid"`
			UUIDs  []string `json:"uuids"`
			All    []string `json:"allUuids"`
		} `json:"preservedMessages"`
	}
	if json.Unmarshal(content, &text) != nil || (len(meta) > 0 && json.Unmarshal(meta, &m) != nil) {
		return Said{}, false
	}
	var p preserved
	if m.Segment != nil {
		p.Segment = preservedSegment(*m.Segment)
	}
	if m.Messages != nil {
		p.Messages = preservedMessages(*m.Messages)
	}
	return boundarySaid(text, logicalParent, p)
}

// AnnouncedBoundarySaid is what the CLI's compact_boundary stdout frame
// says its line says: the line's content (CompactContent), its
// logical_parent_uuid and compact_metadata's preserved_segment and
// preserved_messages.
func AnnouncedBoundarySaid(logicalParent string, meta json.RawMessage) (Said, bool) {
	var m struct {
		Segment *struct {
			Head   string `json:"head_uuid"`
			Anchor string `json:"anchor_uuid"`
			Tail   string `json:"tail_uuid"`
		} `json:"preserved_segment"`
		Messages *struct {
			Anchor string   `json:"anchor_uuid"`
			UUIDs  []string `json:"uuids"`
			All    []string `json:"all_uuids"`
		} `json:"preserved_messages"`
	}
	if len(meta) > 0 && json.Unmarshal(meta, &m) != nil {
		return Said{}, false
	}
	var p preserved
	if m.Segment != nil {
		p.Segment = preservedSegment(*m.Segment)
	}
	if m.Messages != nil {
		p.Messages = preservedMessages(*m.Messages)
	}
	return boundarySaid(CompactContent, logicalParent, p)
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

// CutSaid stands for what a frame of type typ (assistant or user) said
// when the adapter's line framing cut it: its words are not known, only
// its uuid, which a line under it must carry. No line's canonical digest
// is it (those are of JSON objects).
func CutSaid(typ string) Said { return sha256.Sum256([]byte("cut frame\x00" + typ)) }
