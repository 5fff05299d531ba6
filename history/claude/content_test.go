package claude

import (
	"encoding/json"
	"reflect"
	"testing"
)

// TestBlocksOfEveryShape: content that is a string is one text block
// (null an empty one, as encoding/json reads null into a string), a list
// is its blocks, whitespace before either changes nothing, and anything
// else, broken JSON included, is no block; a list element that is not an
// object is an empty block (rendered unavailable), so ordinals stay right.
func TestBlocksOfEveryShape(t *testing.T) {
	text := func(s string) []APIBlock { return []APIBlock{{Type: "text", Text: s}} }
	for _, tc := range []struct {
		raw  string
		want []APIBlock
	}{
		{`"hi"`, text("hi")},
		{" \n\t\"hi\"", text("hi")},
		{`null`, text("")},
		{`[{"type":"text","text":"a"},{"type":"tool_use","id":"t1","name":"bash","input":{"c":1}}]`,
			[]APIBlock{{Type: "text", Text: "a"}, {Type: "tool_use", ID: "t1", Name: "bash", Input: json.RawMessage(`{"c":1}`)}}},
		{"\r\n [ ]", []APIBlock{}},
		{`["a"]`, []APIBlock{{}}}, // an element of another shape keeps its place
		{`[`, nil},
		{`{"type":"text"}`, nil},
		{`42`, nil},
		{``, nil},
	} {
		if got := Blocks(json.RawMessage(tc.raw)); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("Blocks(%q) = %#v, want %#v", tc.raw, got, tc.want)
		}
	}
}
