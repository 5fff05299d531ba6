package proofs

import (
	"errors"
	"math"
	"testing"
)

func TestCanonicalBytes(t *testing.T) {
	tests := []struct {
		name string
		in   any
		want string
	}{
		{"sorted keys no whitespace", map[string]any{"b": 1, "a": []any{3, 1, 2}, "c": nil},
			`{"a":[3,1,2],"b":1,"c":null}`},
		{"nested objects sort", map[string]any{"z": map[string]any{"y": true, "x": false}, "a": ""},
			`{"a":"","z":{"x":false,"y":true}}`},
		{"byte order of keys", map[string]any{"é": 1, "z": 2, "Z": 3, "_": 4},
			`{"Z":3,"_":4,"z":2,"é":1}`},
		{"minimal string escapes", "q\"b\\n\n\t\r\b\f\x01\x1f\x7f<>&\u2028é😀",
			`"q\"b\\n\n\t\r\b\f\u0001\u001f` + "\x7f<>&\u2028é😀" + `"`},
		{"integers exact", []any{uint64(math.MaxUint64), int64(math.MinInt64), 0, -1},
			`[18446744073709551615,-9223372036854775808,0,-1]`},
		{"floats", []any{1.5, 1e21, 1e-7, 100.0},
			`[1.5,1e+21,1e-7,100]`},
		{"struct tags", struct {
			B string `json:"b"`
			A int    `json:"a,omitempty"`
		}{B: "x"}, `{"b":"x"}`},
		{"empty containers", map[string]any{"a": []any{}, "b": map[string]any{}}, `{"a":[],"b":{}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Canonical(tt.in)
			if err != nil {
				t.Fatalf("Canonical: %v", err)
			}
			if string(got) != tt.want {
				t.Fatalf("got  %s\nwant %s", got, tt.want)
			}
			again, err := CanonicalizeJSON(got)
			if err != nil || string(again) != tt.want {
				t.Fatalf("not idempotent: %s, %v", again, err)
			}
		})
	}
}

func TestCanonicalizeJSONNormalizes(t *testing.T) {
	tests := []struct{ in, want string }{
		{" { \"b\" : 1 ,\n \"a\" : [ 1 , 2 ] } ", `{"a":[1,2],"b":1}`},
		{`{"a":"\u0041\u00e9\/"}`, `{"a":"Aé/"}`},
		{`[1.0, -0, 1E2, 0.5e1]`, `[1,0,100,5]`},
		{`"\u001F"`, `"\u001f"`},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := CanonicalizeJSON([]byte(tt.in))
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tt.want {
				t.Fatalf("got %s want %s", got, tt.want)
			}
		})
	}
}

func TestCanonicalRefuses(t *testing.T) {
	values := []struct {
		name string
		in   any
		want error
	}{
		{"NaN", map[string]any{"x": math.NaN()}, ErrNonFinite},
		{"+Inf", []any{math.Inf(1)}, ErrNonFinite},
		{"-Inf float32", float32(math.Inf(-1)), ErrNonFinite},
	}
	for _, tt := range values {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := Canonical(tt.in); !errors.Is(err, tt.want) {
				t.Fatalf("err %v, want %v", err, tt.want)
			}
		})
	}
	raws := []struct {
		name, in string
		want     error
	}{
		{"overflowing number", `[1e999]`, ErrNonFinite},
		{"duplicate key", `{"a":1,"a":2}`, ErrDuplicateKey},
		{"nested duplicate key", `[{"x":{"k":1,"k":1}}]`, ErrDuplicateKey},
		{"invalid utf8", "\"\xff\"", ErrInvalidUTF8},
		{"trailing value", `{} {}`, ErrTrailingData},
	}
	for _, tt := range raws {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := CanonicalizeJSON([]byte(tt.in)); !errors.Is(err, tt.want) {
				t.Fatalf("err %v, want %v", err, tt.want)
			}
		})
	}
	for _, bad := range []string{``, `{`, `{"a"}`, `[1,]`, `nul`} {
		t.Run("syntax "+bad, func(t *testing.T) {
			if _, err := CanonicalizeJSON([]byte(bad)); err == nil {
				t.Fatalf("accepted %q", bad)
			}
		})
	}
}
