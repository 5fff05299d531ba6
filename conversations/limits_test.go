package conversations

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mosaic-agents/mosaic/protocol"
)

func TestPermyriadScaleAndQuota(t *testing.T) {
	// UINT32_SCALE_FROM_PERMYRIAD rounds to closest; 100% is UINT32_MAX.
	for p, want := range map[Permyriad]uint32{10000: math.MaxUint32, 0: 0, 5000: 2147483648, 1: 429497} {
		if got := p.Scale(); got != want {
			t.Errorf("Permyriad(%d).Scale() = %d, want %d", p, got, want)
		}
	}
	if got := (CPUQuota{Share: 29}).PerSecUSec(); got != 2900 {
		t.Errorf("0.29%% = %d usec/s, want 2900", got)
	}
}

// TestLimitsBuiltInCodeAreChecked: Save refuses limits that would not
// read back (two forms at once, a share over 100%, UINT64_MAX bytes).
func TestLimitsBuiltInCodeAreChecked(t *testing.T) {
	s := &Store{Dir: filepath.Join(t.TempDir(), "conversations")}
	for _, l := range []Limits{
		{MemoryMax: MemoryMax{Bytes: 1 << 30, Share: 1000}},
		{MemoryMax: MemoryMax{Share: 10001}},
		{MemoryMax: MemoryMax{Bytes: math.MaxUint64}},
		{TasksMax: TasksMax{Count: 5, Unlimited: true}},
		{CPUQuota: CPUQuota{Share: math.MaxUint32}},
	} {
		c := fixture(t)
		c.Limits = l
		if err := s.Save(c); protocol.CodeOf(err) != protocol.CodeConfiguration {
			t.Errorf("Save(%+v) = %v; want a configuration refusal", l, err)
		}
	}
}

func TestLimitsFileRoundTripAndLoadChecks(t *testing.T) {
	s := &Store{Dir: filepath.Join(t.TempDir(), "conversations")}
	c := fixture(t)
	c.Limits = Limits{MemoryMax: MemoryMax{Bytes: 1536 << 20}, TasksMax: TasksMax{Share: 2500}, CPUQuota: CPUQuota{Share: 20000}}
	if err := s.Save(c); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(s.path(c.ID))
	for _, want := range []string{`memory_max = "1536M"`, `tasks_max = "25%"`, `cpu_quota = "200%"`} {
		if !strings.Contains(string(b), want) {
			t.Fatalf("file lacks %s:\n%s", want, b)
		}
	}
	got, err := s.Load(c.ID)
	if err != nil || got.Limits != c.Limits {
		t.Fatalf("round trip: %+v, %v; want %+v", got, err, c.Limits)
	}

	// Unset limits are not written at all.
	c.Limits = Limits{}
	if err := s.Save(c); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(s.path(c.ID)); strings.Contains(string(b), "max") || strings.Contains(string(b), "quota") {
		t.Fatalf("unset limits written:\n%s", b)
	}

	// Every load checks the values: a hand-edited file is refused naming
	// the key and the value; an old file's integer tasks_max still loads.
	for _, tc := range []struct{ limits, err string }{
		{"memory_max = \"4GB\"\n", `limits.memory_max "4GB"`},
		{"cpu_quota = \"200\"\n", `limits.cpu_quota "200"`},
		{"tasks_max = 0\n", ""},
		{"tasks_max = 512\n", ""},
		{"tasks_max = -3\n", `limits.tasks_max "-3"`},
		{"memory_max = \"\"\ntasks_max = 0\ncpu_quota = \"\"\n", ""}, // what conv add wrote before
		{"memory_max = 4\n", "memory_max"},
		{"cpu_quota = 2.5\n", "cpu_quota"},
	} {
		enc, _ := Encode(&Conversation{ID: c.ID, Project: c.Project, Seat: c.Seat, Workspace: c.Workspace, Session: c.Session})
		text := strings.Replace(string(enc), "[limits]\n", "[limits]\n"+tc.limits, 1)
		if err := os.WriteFile(s.path(c.ID), []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		got, err := s.Load(c.ID)
		switch {
		case tc.err == "" && err != nil:
			t.Errorf("%q refused: %v", tc.limits, err)
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err) || protocol.CodeOf(err) != protocol.CodeConfiguration):
			t.Errorf("%q: err %v, want configuration naming %s", tc.limits, err, tc.err)
		case err != nil:
			t.Logf("%q: %v", tc.limits, err)
		case tc.limits == "tasks_max = 512\n" && got.Limits.TasksMax.Count != 512:
			t.Errorf("legacy tasks_max: %+v", got.Limits)
		}
	}
}
