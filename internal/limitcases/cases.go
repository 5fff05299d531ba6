// Package limitcases is the table of resource-limit values that the
// conversations parser is tested with and that the controller's sandbox
// test sets on real transient units and reads back over D-Bus.
package limitcases

import (
	"math"

	"github.com/mosaic-agents/mosaic/conversations"
)

// Case is one row of the limits table: a value as typed and what it
// must become.
type Case struct {
	Field string // "memory-max", "tasks-max" or "cpu-quota"
	In    string
	// Norm is the normalized value conv show prints; "" for a refusal.
	Norm string
	// Memory, Tasks, CPU are the parsed values (for the field's type).
	Memory conversations.MemoryMax
	Tasks  conversations.TasksMax
	CPU    conversations.CPUQuota
}

// Table lists values as a user types them: systemd's syntax for each
// property, and the findings of issue 11 (values today's parser got
// silently wrong). Rows with Norm == "" must be refused.
func Table() []Case {
	return []Case{
		// MemoryMax=: parse_size base 1024, infinity, N% of physical memory.
		{Field: "memory-max", In: "4G", Norm: "4G", Memory: conversations.MemoryMax{Bytes: 4 << 30}},
		{Field: "memory-max", In: "512M", Norm: "512M", Memory: conversations.MemoryMax{Bytes: 512 << 20}},
		{Field: "memory-max", In: "1.5G", Norm: "1536M", Memory: conversations.MemoryMax{Bytes: 1536 << 20}},
		{Field: "memory-max", In: "0.5K", Norm: "512", Memory: conversations.MemoryMax{Bytes: 512}},
		{Field: "memory-max", In: "1048576", Norm: "1M", Memory: conversations.MemoryMax{Bytes: 1 << 20}},
		{Field: "memory-max", In: "1000", Norm: "1000", Memory: conversations.MemoryMax{Bytes: 1000}},
		{Field: "memory-max", In: "300B", Norm: "300", Memory: conversations.MemoryMax{Bytes: 300}},
		{Field: "memory-max", In: "2T", Norm: "2T", Memory: conversations.MemoryMax{Bytes: 2 << 40}},
		{Field: "memory-max", In: "1.1M", Norm: "1153433", Memory: conversations.MemoryMax{Bytes: 1153433}},
		{Field: "memory-max", In: "infinity", Norm: "infinity", Memory: conversations.MemoryMax{Unlimited: true}},
		{Field: "memory-max", In: "10%", Norm: "10%", Memory: conversations.MemoryMax{Share: 1000}},
		{Field: "memory-max", In: "12.5%", Norm: "12.5%", Memory: conversations.MemoryMax{Share: 1250}},
		{Field: "memory-max", In: "0.01%", Norm: "0.01%", Memory: conversations.MemoryMax{Share: 1}},
		{Field: "memory-max", In: "100%", Norm: "100%", Memory: conversations.MemoryMax{Share: 10000}},
		{Field: "memory-max", In: "4GB"}, // was MemoryMax=4 bytes
		{Field: "memory-max", In: "512MiB"},
		{Field: "memory-max", In: "4g"}, // systemd's suffixes are upper case
		{Field: "memory-max", In: "0"},
		{Field: "memory-max", In: "0%"},
		{Field: "memory-max", In: "101%"},
		{Field: "memory-max", In: "1.234%"},
		{Field: "memory-max", In: "-1G"},
		{Field: "memory-max", In: "+1G"},
		{Field: "memory-max", In: " 1G"},
		{Field: "memory-max", In: "1G 512M"},
		{Field: "memory-max", In: "16E"}, // 2^64: overflows
		{Field: "memory-max", In: "abc"},
		{Field: "memory-max", In: "Infinity"},
		// TasksMax=: a count (safe_atou64), infinity, N% of the system's limit.
		{Field: "tasks-max", In: "512", Norm: "512", Tasks: conversations.TasksMax{Count: 512}},
		{Field: "tasks-max", In: "1", Norm: "1", Tasks: conversations.TasksMax{Count: 1}},
		{Field: "tasks-max", In: "infinity", Norm: "infinity", Tasks: conversations.TasksMax{Unlimited: true}},
		{Field: "tasks-max", In: "25%", Norm: "25%", Tasks: conversations.TasksMax{Share: 2500}},
		{Field: "tasks-max", In: "0"}, // was "the default"
		{Field: "tasks-max", In: "0%"},
		{Field: "tasks-max", In: "4K"}, // no size suffixes for a count
		{Field: "tasks-max", In: "010"},
		{Field: "tasks-max", In: "0x10"},
		{Field: "tasks-max", In: "-5"},
		{Field: "tasks-max", In: "abc"},
		// CPUQuota=: N% only, > 0, at most what parse_permyriad_unbounded reads.
		{Field: "cpu-quota", In: "200%", Norm: "200%", CPU: conversations.CPUQuota{Share: 20000}},
		{Field: "cpu-quota", In: "50%", Norm: "50%", CPU: conversations.CPUQuota{Share: 5000}},
		{Field: "cpu-quota", In: "12.5%", Norm: "12.5%", CPU: conversations.CPUQuota{Share: 1250}},
		{Field: "cpu-quota", In: "0.29%", Norm: "0.29%", CPU: conversations.CPUQuota{Share: 29}},
		{Field: "cpu-quota", In: "1000000%", Norm: "1000000%", CPU: conversations.CPUQuota{Share: 100000000}}, // systemd's own bound is higher
		{Field: "cpu-quota", In: "21474836.47%", Norm: "21474836.47%", CPU: conversations.CPUQuota{Share: math.MaxInt32}},
		{Field: "cpu-quota", In: "21474836.48%"},
		{Field: "cpu-quota", In: "200"}, // was: no quota at all
		{Field: "cpu-quota", In: "0%"},
		{Field: "cpu-quota", In: "-5%"},
		{Field: "cpu-quota", In: "abc"},
		{Field: "cpu-quota", In: "1.234%"},
		{Field: "cpu-quota", In: "infinity"},
		{Field: "cpu-quota", In: "2"},
	}
}
