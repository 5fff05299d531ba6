package terminal

import (
	"encoding/json"
	"strings"

	"github.com/mosaic-agents/mosaic/protocol"
)

// NoticeLine is a controller notice as one line, the same words for
// every client that shows one (attach's notice row, the web page's
// records): the kind, the controller's message, and an extension's
// update's untrusted detail after the fixed words (its key, then its
// text or lines, or that it was cleared). It is not made inert here: the
// caller shows it through SanitizeLine, as it does every engine string;
// set_editor_text's text is shown, never put into a composer.
func NoticeLine(n *protocol.Notice) string {
	line := n.Kind + ": " + n.Message
	var d struct {
		Key   string   `json:"key"`
		Text  string   `json:"text"`
		Lines []string `json:"lines"`
		Clear bool     `json:"clear"`
	}
	if len(n.Detail) == 0 || json.Unmarshal(n.Detail, &d) != nil {
		return line
	}
	if d.Key != "" {
		line += " [" + d.Key + "]"
	}
	switch {
	case d.Clear:
		line += " cleared"
	case d.Text != "":
		line += ": " + d.Text
	case len(d.Lines) > 0:
		line += ": " + strings.Join(d.Lines, " | ")
	}
	return line
}
