package pi

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/mosaic-agents/mosaic/engine"
	"github.com/mosaic-agents/mosaic/protocol"
)

// maxDialogID bounds the native request id the adapter accepts as a
// decision identity; pinned Pi sends a UUID.
const maxDialogID = 128

// maxOpenDialogs bounds the dialogs held open, and
// engine.MaxDecisionBytes the bytes they hold; a request past either is
// an unavailable event (unsupported-native-event) and never answerable.
const maxOpenDialogs = 256

// uiRequest is extension_ui_request as pinned Pi writes it
// (rpc-mode.js:47-224; DIGEST §1.2).
type uiRequest struct {
	ID              string   `json:"id"`
	Method          string   `json:"method"`
	Title           *string  `json:"title"`
	Message         *string  `json:"message"`
	Options         []string `json:"options"`
	Timeout         *float64 `json:"timeout"`
	Placeholder     *string  `json:"placeholder"`
	Prefill         *string  `json:"prefill"`
	StatusKey       string   `json:"statusKey"`
	StatusText      *string  `json:"statusText"`
	WidgetKey       string   `json:"widgetKey"`
	WidgetLines     []string `json:"widgetLines"`
	WidgetPlacement string   `json:"widgetPlacement"`
	NotifyType      string   `json:"notifyType"`
	Text            *string  `json:"text"`
}

// dialog is one native dialog the engine holds open: what it asked and
// the exact choices an answer may take.
type dialog struct {
	method  string
	options []string
	// title and message are the request's texts (Decisions shows them);
	// seq orders the dialogs by arrival.
	title, message string
	seq            uint64
	// closed is when the engine has resolved the dialog by itself, its
	// native timeout after the adapter read the request (zero: never).
	closed time.Time
}

// bytes is what dialog id holds against engine.MaxDecisionBytes: its
// strings as decoded (a confirm's choices are the adapter's own).
func (d dialog) bytes(id string) int {
	n := len(id) + len(d.title) + len(d.message)
	if d.method == protocol.FormSelect {
		for _, o := range d.options {
			n += len(o)
		}
	}
	return n
}

// room reports whether request ui may be taken: the dialogs held open
// stay within maxOpenDialogs and, with ui's, within
// engine.MaxDecisionBytes. c.mu is held.
func (c *Conn) room(ui *protocol.NativeUI) bool {
	c.dropTimedOut()
	if len(c.dialogs) >= maxOpenDialogs {
		return false
	}
	if !protocol.IsForm(ui.Method) {
		return true // held by nobody once its event is out
	}
	held := dialog{method: ui.Method, options: ui.Options, title: ui.Title, message: ui.Message}.bytes(ui.ID)
	for id, d := range c.dialogs {
		held += d.bytes(id)
	}
	return held <= engine.MaxDecisionBytes
}

// parseUI turns an extension_ui_request line into its NativeUI, or an
// error for a request the adapter cannot trust (no id, an id too long, an
// unknown method, a dialog field of the wrong type).
func parseUI(line []byte, n *native, inRun bool) (*protocol.NativeUI, error) {
	var r uiRequest
	if err := json.Unmarshal(line, &r); err != nil {
		return nil, fmt.Errorf("extension_ui_request: %w", err)
	}
	if r.ID == "" || len(r.ID) > maxDialogID {
		return nil, fmt.Errorf("extension_ui_request: id of %d bytes, want 1-%d", len(r.ID), maxDialogID)
	}
	ui := &protocol.NativeUI{ID: r.ID, Method: r.Method, Title: str(r.Title), InRun: inRun,
		Cut: n.clip != nil && (n.clip.Strings > 0 || n.clip.Dropped > 0)}
	switch r.Method {
	case protocol.FormConfirm:
		ui.Message = str(r.Message)
	case protocol.FormSelect:
		if len(r.Options) == 0 {
			return nil, errors.New("extension_ui_request: a select without options")
		}
		ui.Options = r.Options
	case protocol.FormInput:
		ui.Message = str(r.Placeholder)
	case protocol.FormEditor:
		ui.Message = str(r.Prefill)
	case "notify":
		ui.Message, ui.Level = str(r.Message), r.NotifyType
	case "setStatus":
		ui.Key, ui.Message, ui.Clear = r.StatusKey, str(r.StatusText), r.StatusText == nil
	case "setWidget":
		ui.Key, ui.Options, ui.Level, ui.Clear = r.WidgetKey, r.WidgetLines, r.WidgetPlacement, r.WidgetLines == nil
	case "setTitle":
	case "set_editor_text":
		ui.Message = str(r.Text)
	default:
		return nil, fmt.Errorf("extension_ui_request: unknown method %q", label(r.Method))
	}
	if r.Timeout != nil && *r.Timeout > 0 && r.Method != protocol.FormEditor {
		ui.TimeoutMS = int64(*r.Timeout)
	}
	return ui, nil
}

func str(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

// uiEvent maps one extension_ui_request: a native-ui event carrying the
// parsed request; a dialog is held open until it is answered or
// cancelled. A request past the bounds of what is held open (room) is
// refused like one not trusted. c.mu is held.
func (c *Conn) uiEvent(line []byte, n *native) {
	ui, err := parseUI(line, n, c.tr.running)
	if err != nil || !c.room(ui) {
		// Not trusted enough to answer, or past the bounds of what is
		// held open: shown as a gap, never answered.
		c.push(c.mp.unavailable(protocol.ReasonUnsupportedNative, n.Type))
		return
	}
	if protocol.IsForm(ui.Method) {
		if _, open := c.dialogs[ui.ID]; open {
			// The first request keeps the id: replacing it would send the
			// answer to what a user saw for the first to a second, unseen
			// request (or the reverse), since the answer names only the id.
			c.push(c.mp.unavailable(protocol.ReasonDuplicateID, n.Type))
			return
		}
		opts := ui.Options
		if ui.Method == protocol.FormConfirm {
			opts = []string{"true", "false"}
		}
		c.dseq++
		d := dialog{method: ui.Method, options: opts, title: ui.Title, message: ui.Message, seq: c.dseq}
		if ui.TimeoutMS > 0 {
			d.closed = time.Now().Add(time.Duration(ui.TimeoutMS) * time.Millisecond)
		}
		c.dialogs[ui.ID] = d
		c.wake()
	}
	e := c.mp.event(protocol.EventNativeUI)
	e.Native = label(ui.Method)
	e.Truncated = ui.Cut
	e.UI = ui
	c.push(e)
}

// Answer sends the one extension_ui_response for an open confirm or
// select: choice must be exactly one of its native choices ("true" or
// "false" for a confirm, one label for a select), sent as a real boolean
// or the exact label. The dialog is closed before the write, so two
// answers to one id can never both be written. Input and editor are
// never answered (ErrAnswerShape).
func (c *Conn) Answer(id, choice string) error {
	c.mu.Lock()
	d, ok := c.dialogs[id]
	if !ok {
		c.mu.Unlock()
		return fmt.Errorf("answer %s: %w", id, engine.ErrDialogClosed)
	}
	var resp any
	switch d.method {
	case protocol.FormConfirm:
		if choice == "true" || choice == "false" {
			resp = struct {
				Type      string `json:"type"`
				ID        string `json:"id"`
				Confirmed bool   `json:"confirmed"`
			}{"extension_ui_response", id, choice == "true"}
		}
	case protocol.FormSelect:
		if contains(d.options, choice) {
			resp = struct {
				Type  string `json:"type"`
				ID    string `json:"id"`
				Value string `json:"value"`
			}{"extension_ui_response", id, choice}
		}
	}
	if resp == nil {
		c.mu.Unlock()
		return fmt.Errorf("answer %s %s: %w", d.method, id, engine.ErrAnswerShape)
	}
	delete(c.dialogs, id)
	c.wake()
	c.mu.Unlock()
	return c.send(resp)
}

// Cancel sends {"cancelled":true} for every dialog still open and returns
// their ids, in no particular order. Pi then hands a confirm false and
// the others undefined. Interrupt calls it right after writing abort,
// since abort waits for a dialog whose extension took no signal.
func (c *Conn) Cancel() ([]string, error) {
	c.mu.Lock()
	ids := make([]string, 0, len(c.dialogs))
	for id := range c.dialogs {
		ids = append(ids, id)
	}
	if len(ids) > 0 {
		clear(c.dialogs)
		c.wake()
	}
	c.mu.Unlock()
	var first error
	for _, id := range ids {
		err := c.send(struct {
			Type      string `json:"type"`
			ID        string `json:"id"`
			Cancelled bool   `json:"cancelled"`
		}{"extension_ui_response", id, true})
		if err != nil && first == nil {
			first = err
		}
	}
	return ids, first
}

// Forget closes a dialog without writing anything: its native timeout
// passed, and Pi resolved it by itself and drops any later answer.
func (c *Conn) Forget(id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.dialogs[id]; ok {
		delete(c.dialogs, id)
		c.wake()
	}
}

// dropTimedOut closes the dialogs whose native timeout has passed: the
// engine resolved each by itself and writes nothing, so only the
// controller's Forget, after its pump reached the dialog's event, would
// close them. A pump that fell behind the engine's output (a loaded
// machine, an extension asking confirms with a 1 ms timeout in a loop)
// left them filling maxOpenDialogs, and requests after them were refused
// unanswerable. Pi's timer started when it wrote the request, before the
// adapter read it. c.mu is held.
func (c *Conn) dropTimedOut() {
	now, dropped := time.Now(), false
	for id, d := range c.dialogs {
		if !d.closed.IsZero() && !now.Before(d.closed) {
			delete(c.dialogs, id)
			dropped = true
		}
	}
	if dropped {
		c.wake()
	}
}

// OpenDialogs counts the dialogs the engine holds open as far as this
// connection knows (a timed-out one stays counted until Forget, or until
// a request past it finds its native timeout passed).
func (c *Conn) OpenDialogs() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.dialogs)
}

// DialogOpen reports whether the engine holds dialog id open.
func (c *Conn) DialogOpen(id string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, ok := c.dialogs[id]
	return ok
}
