package protocol

import (
	"errors"
	"strings"
	"testing"
)

func TestValidate(t *testing.T) {
	tests := []struct {
		name string
		in   string
		ok   bool
	}{
		{"hello", `{"type":"hello"}`, true},
		{"nested", `{"a":[1,2,{"b":null}],"c":true,"d":-0.5e3}`, true},
		{"u2028 in string", "{\"t\":\"a\u2028b\"}", true},
		{"surrogate pair", `{"t":"\ud83d\ude00"}`, true},
		{"max safe", `{"n":9007199254740991}`, true},
		{"duplicate key", `{"type":"hello","type":"prompt"}`, false},
		{"duplicate key by escape", `{"type":1,"typ\u0065":2}`, false},
		{"lone high surrogate", `{"t":"\ud83d"}`, false},
		{"lone low surrogate", `{"t":"\ude00x"}`, false},
		{"high then non-low", `{"t":"\ud83d\u0041"}`, false},
		{"unsafe integer", `{"n":9007199254740992}`, false},
		{"unsafe negative", `{"n":-9007199254740992}`, false},
		{"2^64, zero in 64 bits", `{"n":18446744073709551616}`, false},
		{"duplicate key past a small object", `{"a":1,"b":2,"c":3,"d":4,"e":5,"f":6,"g":7,"h":8,"i":9,"j":10,"k":11,"l":12,"m":13,"n":14,"o":15,"p":16,"q":17,"b":18}`, false},
		{"seventeen keys", `{"a":1,"b":2,"c":3,"d":4,"e":5,"f":6,"g":7,"h":8,"i":9,"j":10,"k":11,"l":12,"m":13,"n":14,"o":15,"p":16,"q":17}`, true},
		{"huge float", `{"n":1e999}`, false},
		{"NaN literal", `{"n":NaN}`, false},
		{"Infinity literal", `{"n":Infinity}`, false},
		{"leading zero", `{"n":01}`, false},
		{"trailing data", `{"a":1} x`, false},
		{"two values", `{"a":1}{"b":2}`, false},
		{"invalid utf8", "{\"t\":\"\xff\"}", false},
		{"control char", "{\"t\":\"a\x01\"}", false},
		{"unterminated", `{"t":"abc`, false},
		{"empty", ``, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := Validate([]byte(tt.in))
			if tt.ok && err != nil {
				t.Fatalf("Validate(%q) = %v, want ok", tt.in, err)
			}
			if !tt.ok {
				if err == nil {
					t.Fatalf("Validate(%q) = nil, want an error", tt.in)
				}
				if !errors.Is(err, ErrMalformed) {
					t.Fatalf("error %v is not ErrMalformed", err)
				}
			}
		})
	}
}

func TestValidateDepth(t *testing.T) {
	deep := make([]byte, 0, 200)
	for range 100 {
		deep = append(deep, '[')
	}
	for range 100 {
		deep = append(deep, ']')
	}
	if err := Validate(deep); err == nil {
		t.Fatal("100 levels of nesting accepted")
	}
}

func TestLineReaderLongLineBeyondBuffer(t *testing.T) {
	// A line longer than a block but under the cap survives whole.
	long := strings.Repeat("x", 200<<10)
	lr := NewLineReader(strings.NewReader(long+"\nnext\n"), 1<<20)
	got, err := lr.Next()
	if err != nil || string(got) != long {
		t.Fatalf("long line: len %d, err %v", len(got), err)
	}
	got, err = lr.Next()
	if err != nil || string(got) != "next" {
		t.Fatalf("after long line: %q, %v", got, err)
	}
}

func TestDecodeCodes(t *testing.T) {
	tests := []struct {
		in   string
		code string
	}{
		{`{"type":"hello"}`, ""},
		{`{"type":"hello","client":"x","protocol":1}`, ""},
		{`{"type":"hello","extra":1}`, CodeMalformed},
		{`{"type":"hello","type":"hello"}`, CodeMalformed},
		{`not json`, CodeMalformed},
		{"{\"type\":\"\xc3\"}", CodeInvalidUTF8},
	}
	for _, tt := range tests {
		var h Hello
		err := Decode([]byte(tt.in), &h)
		if got := CodeOf(err); got != tt.code {
			t.Errorf("Decode(%q) code = %q (%v), want %q", tt.in, got, err, tt.code)
		}
	}
}
