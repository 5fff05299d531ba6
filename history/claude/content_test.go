package claude

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/mosaic-agents/mosaic/history"
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

// TestBlocksBounded (mutant 321): a list of more content blocks than a
// message may show (history.MaxBlocks) is one unavailable block, never
// decoded: each block decodes to far more than the 3 bytes of `{}`, and a
// line a tool appends to the transcript would hold the controller's
// memory, as a Pi session's would.
func TestBlocksBounded(t *testing.T) {
	list := func(n int) json.RawMessage {
		return json.RawMessage("[" + strings.TrimSuffix(strings.Repeat(`{"type":"text","text":"x"},`, n), ",") + "]")
	}
	if got := Blocks(list(history.MaxBlocks)); len(got) != history.MaxBlocks {
		t.Fatalf("%d blocks at the bound, want %d", len(got), history.MaxBlocks)
	}
	if got := Blocks(list(history.MaxBlocks + 1)); !reflect.DeepEqual(got, []APIBlock{{Type: "unavailable"}}) {
		t.Fatalf("past the bound: %d blocks, want one unavailable", len(got))
	}
}
