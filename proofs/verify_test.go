package proofs

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

func TestVerifyReaderPrintsChecks(t *testing.T) {
	p, err := NewCohortProof(goodObservation())
	if err != nil {
		t.Fatal(err)
	}
	enc, _ := Encode(p)
	var pretty bytes.Buffer
	if err := json.Indent(&pretty, enc, "", "  "); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := VerifyReader(&pretty, &out); err != nil {
		t.Fatalf("pretty-printed proof refused: %v\n%s", err, out.String())
	}
	for _, name := range []string{"fields", "digest", "members", "deaths-after-start", "observed-after-deaths", "cgroup-empty", "unit-state", "boot-id"} {
		if !strings.Contains(out.String(), "ok    "+name) {
			t.Errorf("output lacks passing check %q:\n%s", name, out.String())
		}
	}
	if !strings.Contains(out.String(), "verified: all") {
		t.Errorf("no verdict line:\n%s", out.String())
	}
}

func TestVerifyReaderRefuses(t *testing.T) {
	p, err := NewCohortProof(goodObservation())
	if err != nil {
		t.Fatal(err)
	}
	enc, _ := Encode(p)
	boot, _ := NewBootProof("c", "e", bootA, bootB, goodObservation().ObservedWall)
	bootEnc, _ := Encode(boot)
	tests := []struct {
		name  string
		in    string
		check string // a FAIL line expected, "" for a decode failure
	}{
		{"populated edited", strings.Replace(string(enc), `"populated":0`, `"populated":1`, 1), "cgroup-empty"},
		{"populated missing", strings.Replace(string(enc), `,"populated":0`, ``, 1), "fields"},
		{"members null", strings.Replace(string(enc), `"members":[`, `"members":null,"x":[`, 1), ""},
		{"unknown field", strings.Replace(string(enc), `{`, `{"extra":1,`, 1), ""},
		{"duplicate key", strings.Replace(string(enc), `{`, `{"populated":1,`, 1), ""},
		{"unknown type", `{"type":"pgroup"}`, ""},
		{"a withdrawn launch record", `{"type":"withdrawn","basis":"no-incarnation"}`, ""},
		{"not json", `hello`, ""},
		{"boot proof same boot", strings.ReplaceAll(string(bootEnc), bootB, bootA), "boot-differs"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out bytes.Buffer
			err := VerifyReader(strings.NewReader(tt.in), &out)
			if err == nil {
				t.Fatalf("accepted:\n%s", out.String())
			}
			want := "FAIL  decode"
			if tt.check != "" {
				want = "FAIL  " + tt.check
			}
			if !strings.Contains(out.String(), want) {
				t.Fatalf("output lacks %q:\n%s", want, out.String())
			}
		})
	}
}

func TestVerifyReaderBootProof(t *testing.T) {
	boot, _ := NewBootProof("c", "e", bootA, bootB, goodObservation().ObservedWall)
	enc, _ := Encode(boot)
	var out bytes.Buffer
	if err := VerifyReader(bytes.NewReader(enc), &out); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	if !strings.Contains(out.String(), "ok    boot-differs") {
		t.Fatalf("missing check:\n%s", out.String())
	}
	var tampered bytes.Buffer
	err := VerifyReader(strings.NewReader(strings.Replace(string(enc), `"execution":"e"`, `"execution":"f"`, 1)), &tampered)
	if !errors.Is(err, ErrDigest) {
		t.Fatalf("err %v want ErrDigest\n%s", err, tampered.String())
	}
}
