package web

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/mosaic-agents/mosaic/protocol"
)

// TestNoticeRecordIsAttachsLine: a controller notice reaches the page as
// the line attach's notice row shows (terminal.NoticeLine), made inert:
// the lost place, a restart, and an extension's update with its key and
// text, which is the engine's and may carry markup and escapes.
func TestNoticeRecordIsAttachsLine(t *testing.T) {
	for _, tc := range []struct {
		name string
		n    protocol.Notice
		want string
	}{
		{"lost place", protocol.Notice{Kind: protocol.NoticeLostPlace, Message: "this connection read too slowly", Detail: json.RawMessage(`{"missedFrom":7}`)},
			"lost-place: this connection read too slowly"},
		{"extension status", protocol.Notice{Kind: protocol.NoticeStatus, Message: "extension status", Detail: json.RawMessage(`{"key":"k\u202e","text":"<b>hi</b>\u001b[31m"}`)},
			"status: extension status [k<U+202E>]: <b>hi</b>^[[31m"},
		{"widget cleared", protocol.Notice{Kind: protocol.NoticeWidget, Message: "extension widget", Detail: json.RawMessage(`{"key":"w","clear":true}`)},
			"widget: extension widget [w] cleared"},
		{"widget lines", protocol.Notice{Kind: protocol.NoticeWidget, Message: "extension widget", Detail: json.RawMessage(`{"key":"w","lines":["a\nb","c"]}`)},
			"widget: extension widget [w]: a^Jb | c"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var r struct {
				Record, Line string
			}
			if err := json.Unmarshal(noticeRecord(&tc.n), &r); err != nil {
				t.Fatal(err)
			}
			if r.Record != protocol.RecordNotice || r.Line != tc.want {
				t.Errorf("record %q line %q, want a notice with line %q", r.Record, r.Line, tc.want)
			}
		})
	}
}

// TestRecordLinesBounded: a record line carrying engine text (an
// extension's status or widget update, sent as often as the engine
// likes, a refusal, a newer controller's record) reaches the tab's
// outbox and the page clipped, never the engine's megabyte line whole
// (made inert it may grow several times over).
func TestRecordLinesBounded(t *testing.T) {
	big := strings.Repeat("\u202e<b>x</b>", 1<<17) // ~1.3 MiB; each U+202E shows as 8 bytes
	lines, _ := json.Marshal(map[string]any{"key": "w", "lines": []string{big, big}})
	text, _ := json.Marshal(map[string]any{"key": "s", "text": big})
	for _, tc := range []struct {
		name   string
		record json.RawMessage
		field  string
	}{
		{"status text", noticeRecord(&protocol.Notice{Kind: protocol.NoticeStatus, Message: "extension status", Detail: text}), "line"},
		{"widget lines", noticeRecord(&protocol.Notice{Kind: protocol.NoticeWidget, Message: "extension widget", Detail: lines}), "line"},
		{"notice message", noticeRecord(&protocol.Notice{Kind: protocol.NoticeStatus, Message: big}), "message"},
		{"refusal", refusalRecord(&protocol.RefusalRecord{Code: "x", Message: big}), "line"},
		{"unknown record", unknownRecord("newer", []byte(big)), "text"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var r map[string]string
			if err := json.Unmarshal(tc.record, &r); err != nil {
				t.Fatal(err)
			}
			got := r[tc.field]
			if len(got) > maxRecordLine+64 || !strings.Contains(got, "more bytes not shown") {
				t.Errorf("%s is %d bytes (ends %q), want at most %d and the count of the rest", tc.field, len(got), got[max(0, len(got)-40):], maxRecordLine+64)
			}
			if !utf8.ValidString(got) {
				t.Errorf("%s was cut inside a rune", tc.field)
			}
			if len(tc.record) > 128<<10 { // JSON may escape each byte of three fields as six
				t.Errorf("the record is %d bytes, want at most 128 KiB", len(tc.record))
			}
		})
	}
}
