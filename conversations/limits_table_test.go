package conversations_test

import (
	"strings"
	"testing"

	"github.com/mosaic-agents/mosaic/conversations"
	"github.com/mosaic-agents/mosaic/internal/limitcases"
	"github.com/mosaic-agents/mosaic/protocol"
)

// TestLimitTable parses every row of the shared table: accepted values
// become the typed value and print normalized; the rest are refused with
// a message naming the field, the value and an example.
func TestLimitTable(t *testing.T) {
	for _, tc := range limitcases.Table() {
		t.Run(tc.Field+"="+tc.In, func(t *testing.T) {
			var (
				norm string
				err  error
			)
			switch tc.Field {
			case "memory-max":
				var m conversations.MemoryMax
				m, err = conversations.ParseMemoryMax(tc.Field, tc.In)
				norm = m.String()
				if err == nil && m != tc.Memory {
					t.Fatalf("parsed %+v, want %+v", m, tc.Memory)
				}
			case "tasks-max":
				var v conversations.TasksMax
				v, err = conversations.ParseTasksMax(tc.Field, tc.In)
				norm = v.String()
				if err == nil && v != tc.Tasks {
					t.Fatalf("parsed %+v, want %+v", v, tc.Tasks)
				}
			case "cpu-quota":
				var q conversations.CPUQuota
				q, err = conversations.ParseCPUQuota(tc.Field, tc.In)
				norm = q.String()
				if err == nil && q != tc.CPU {
					t.Fatalf("parsed %+v, want %+v", q, tc.CPU)
				}
			}
			if tc.Norm == "" {
				if err == nil {
					t.Fatalf("accepted as %q; want a refusal", norm)
				}
				if protocol.CodeOf(err) != protocol.CodeConfiguration {
					t.Fatalf("code %q (%v), want configuration", protocol.CodeOf(err), err)
				}
				// The refusal names the field, the value and an example.
				msg := err.Error()
				if !strings.Contains(msg, tc.Field) || !strings.Contains(msg, `"`+tc.In+`"`) || !strings.Contains(msg, "use ") {
					t.Fatalf("refusal %q does not name the field, the value and an example", msg)
				}
				return
			}
			if err != nil {
				t.Fatalf("refused: %v", err)
			}
			if norm != tc.Norm {
				t.Fatalf("normalized to %q, want %q", norm, tc.Norm)
			}
		})
	}
}
