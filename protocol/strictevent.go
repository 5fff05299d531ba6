package protocol

import "slices"

// Depths of an event's raw values in its line: tool arguments and
// results (event, tool) and a content block's arguments (event, content,
// block).
const (
	toolRawDepth  = 2
	blockRawDepth = 3
)

// Strict returns e without the raw values an engine wrote that a
// client's strict decoding of the event's line would refuse (Validate:
// an unsafe integer, a lone surrogate, a duplicate key, invalid UTF-8,
// nesting past the bound). encoding/json, which read the engine's line,
// checks none of these, and a client refuses the line whole and ends its
// connection. What is left out is marked truncated, as a value cut for
// size is: the history page carries the message as it was persisted.
// The engine's Tool and Content are copied before a change, never
// written.
func (e Event) Strict() Event {
	if t := e.Tool; t != nil {
		args, result := strictRaw(t.Args, toolRawDepth), strictRaw(t.Result, toolRawDepth)
		if len(args) != len(t.Args) || len(result) != len(t.Result) {
			c := *t
			c.Args, c.Result = args, result
			e.Tool, e.Truncated = &c, true
		}
	}
	cloned := false
	for i := range e.Content {
		if args := e.Content[i].Args; len(strictRaw(args, blockRawDepth)) == len(args) {
			continue
		}
		if !cloned {
			e.Content, cloned = slices.Clone(e.Content), true
		}
		e.Content[i].Args, e.Content[i].Truncated = nil, true
		e.Truncated = true
	}
	return e
}

// strictRaw is raw when Validate accepts it depth levels down a line,
// nil otherwise.
func strictRaw(raw []byte, depth int) []byte {
	if len(raw) == 0 || ValidateAt(raw, depth) == nil {
		return raw
	}
	return nil
}
