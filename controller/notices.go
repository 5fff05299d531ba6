package controller

import (
	"encoding/json"

	"github.com/mosaic-agents/mosaic/protocol"
)

// uiDetail is a fire-and-forget update's untrusted content, carried in a
// notice's detail for clients to show inert.
type uiDetail struct {
	Key   string   `json:"key,omitempty"`
	Text  string   `json:"text,omitempty"`
	Lines []string `json:"lines,omitempty"`
	Level string   `json:"level,omitempty"`
	Clear bool     `json:"clear,omitempty"`
}

// uiNotices maps each fire-and-forget method to its notice kind and the
// fixed words a client shows beside the inert detail.
var uiNotices = map[string]struct{ kind, message string }{
	"notify":          {protocol.NoticeNotify, "extension notification"},
	"setStatus":       {protocol.NoticeStatus, "extension status"},
	"setWidget":       {protocol.NoticeWidget, "extension widget"},
	"setTitle":        {protocol.NoticeTitle, "extension asked for a window title"},
	"set_editor_text": {protocol.NoticeEditorText, "extension offered composer text; it is shown, never written into a composer"},
}

// uiNotice turns a fire-and-forget update into a notice to every client.
// Nothing answers it, and nothing the engine sends here acts on a client:
// set_editor_text is shown as text, never placed in a composer.
func (c *Controller) uiNotice(ui *protocol.NativeUI) {
	n, ok := uiNotices[ui.Method]
	if !ok {
		return
	}
	d := uiDetail{Key: ui.Key, Text: ui.Message, Lines: ui.Options, Level: ui.Level, Clear: ui.Clear}
	if ui.Method == "setTitle" {
		d.Text = ui.Title
	}
	raw, err := json.Marshal(d)
	if err != nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.broadcastLocked(protocol.Notice{Record: protocol.RecordNotice, Kind: n.kind, Message: n.message, Detail: raw})
}
