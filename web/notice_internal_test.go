package web

import (
	"encoding/json"
	"testing"

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
