package terminal

// Item is one item of a Transcript as Lines(0) shows it, for a renderer
// that lays text out itself (the web page wraps in the browser): the same
// sanitized lines the terminal shows, unwrapped, with what kind of item
// they are so the renderer can fold tool calls and results. A tool
// whose result message is present is left out, as in Lines.
type Item struct {
	// Kind is message, tool, notice or marker.
	Kind string `json:"kind"`
	// Role is the message's role (user, assistant, toolResult).
	Role string `json:"role,omitempty"`
	// Open is false for a message still streaming and a running tool.
	Open  bool     `json:"open,omitempty"`
	Lines []string `json:"lines"`
}

var itemKinds = map[itemKind]string{itemMessage: "message", itemTool: "tool", itemNotice: "notice", itemMarker: "marker"}

// Items returns the transcript's items in order.
func (t *Transcript) Items() []Item {
	out := make([]Item, 0, len(t.items))
	for _, it := range t.items {
		if it.kind == itemTool && t.results[it.tool.callID] {
			continue
		}
		x := Item{Kind: itemKinds[it.kind], Lines: it.lines(0)}
		switch it.kind {
		case itemMessage:
			x.Role, x.Open = it.msg.role, !it.msg.final || it.msg.lastPart < 0
		case itemTool:
			x.Open = !it.tool.done
		}
		out = append(out, x)
	}
	return out
}
