package conversations

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/mosaic-agents/mosaic/protocol"
)

// Limits are resource properties of the engine's scope, parsed with
// systemd's own syntax for each property (see the package doc for the
// accepted subset). The zero value of each field means "not set": the
// scope inherits the slice's limits.
type Limits struct {
	MemoryMax MemoryMax `toml:"memory_max,omitempty"`
	TasksMax  TasksMax  `toml:"tasks_max,omitempty"`
	CPUQuota  CPUQuota  `toml:"cpu_quota,omitempty"`
}

// validate checks that each limit reads back as itself from the file, so
// a value built in code (not parsed) cannot be saved in a form Load
// refuses, or one systemd would refuse.
func (l Limits) validate() error {
	if m, err := ParseMemoryMax("limits.memory_max", l.MemoryMax.String()); err != nil || m != l.MemoryMax {
		return refuseLimit("limits.memory_max", l.MemoryMax.String(), fmt.Sprintf("%+v does not read back as itself", l.MemoryMax), memoryExamples)
	}
	if t, err := ParseTasksMax("limits.tasks_max", l.TasksMax.String()); err != nil || t != l.TasksMax {
		return refuseLimit("limits.tasks_max", l.TasksMax.String(), fmt.Sprintf("%+v does not read back as itself", l.TasksMax), tasksExamples)
	}
	if q, err := ParseCPUQuota("limits.cpu_quota", l.CPUQuota.String()); err != nil || q != l.CPUQuota {
		return refuseLimit("limits.cpu_quota", l.CPUQuota.String(), fmt.Sprintf("%+v does not read back as itself", l.CPUQuota), cpuExamples)
	}
	return nil
}

// Permyriad is a share in hundredths of a percent: 10000 is 100%.
type Permyriad uint32

// String prints p the way systemd's parse_permyriad reads it back, with
// no more decimals than needed: 1250 is "12.5%".
func (p Permyriad) String() string {
	s := strconv.FormatUint(uint64(p/100), 10)
	if frac := p % 100; frac != 0 {
		s += strings.TrimRight(fmt.Sprintf(".%02d", frac), "0")
	}
	return s + "%"
}

// Scale is p as systemd's UINT32_SCALE_FROM_PERMYRIAD computes it: the
// value of the *Scale D-Bus properties, where UINT32_MAX is 100%.
func (p Permyriad) Scale() uint32 {
	return uint32((uint64(min(p, 10000))*math.MaxUint32 + 5000) / 10000)
}

// MemoryMax is MemoryMax= of the engine's scope: bytes, infinity, or a
// share of physical memory that systemd resolves (MemoryMaxScale).
type MemoryMax struct {
	Bytes     uint64    // > 0: a byte limit
	Share     Permyriad // > 0: a share of physical memory
	Unlimited bool      // infinity
}

// IsSet reports whether a limit was configured.
func (m MemoryMax) IsSet() bool { return m.Bytes > 0 || m.Share > 0 || m.Unlimited }

// TasksMax is TasksMax= of the engine's scope: a count, infinity, or a
// share of the system's task limit (TasksMaxScale).
type TasksMax struct {
	Count     uint64
	Share     Permyriad
	Unlimited bool
}

// IsSet reports whether a limit was configured.
func (t TasksMax) IsSet() bool { return t.Count > 0 || t.Share > 0 || t.Unlimited }

// CPUQuota is CPUQuota= of the engine's scope, in hundredths of a
// percent of one CPU: 20000 is CPUQuota=200%, two CPUs' worth.
type CPUQuota struct {
	Share Permyriad
}

// IsSet reports whether a quota was configured.
func (q CPUQuota) IsSet() bool { return q.Share > 0 }

// PerSecUSec is the quota as the CPUQuotaPerSecUSec D-Bus property, as
// systemd computes it from CPUQuota= (microseconds of CPU per second).
func (q CPUQuota) PerSecUSec() uint64 { return uint64(q.Share) * 1000000 / 10000 }

const (
	memoryExamples = "use 4G (4 GiB), 512M, 1.5G, 10% (of physical memory) or infinity"
	tasksExamples  = "use a count such as 512, 10% (of the system's task limit) or infinity"
	cpuExamples    = "use a percentage of one CPU such as 50%, 200% (two CPUs) or 12.5%"
)

// ParseMemoryMax parses a MemoryMax= value; field names the setting in
// the refusal ("memory-max" for the flag, "memory_max" for the file).
func ParseMemoryMax(field, s string) (MemoryMax, error) {
	switch {
	case s == "":
		return MemoryMax{}, nil
	case s == "infinity":
		return MemoryMax{Unlimited: true}, nil
	case strings.HasSuffix(s, "%"):
		p, err := parsePermyriad(s, 10000)
		if err != nil || p == 0 {
			return MemoryMax{}, refuseLimit(field, s, "not a share of physical memory systemd accepts (more than 0%, at most 100%, at most two decimals)", memoryExamples)
		}
		return MemoryMax{Share: p}, nil
	}
	n, err := parseSize(s)
	if err != nil {
		return MemoryMax{}, refuseLimit(field, s, "not a size systemd accepts", memoryExamples)
	}
	if n == 0 || n == math.MaxUint64 {
		return MemoryMax{}, refuseLimit(field, s, "out of range (systemd refuses a MemoryMax= of 0; leave it unset for no limit)", memoryExamples)
	}
	return MemoryMax{Bytes: n}, nil
}

// ParseTasksMax parses a TasksMax= value.
func ParseTasksMax(field, s string) (TasksMax, error) {
	switch {
	case s == "":
		return TasksMax{}, nil
	case s == "infinity":
		return TasksMax{Unlimited: true}, nil
	case strings.HasSuffix(s, "%"):
		p, err := parsePermyriad(s, 10000)
		if err != nil || p == 0 {
			return TasksMax{}, refuseLimit(field, s, "not a share systemd accepts (more than 0%, at most 100%, at most two decimals)", tasksExamples)
		}
		return TasksMax{Share: p}, nil
	}
	if !plainNumber(s) {
		return TasksMax{}, refuseLimit(field, s, "not a count systemd accepts", tasksExamples)
	}
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil || n == 0 || n == math.MaxUint64 {
		return TasksMax{}, refuseLimit(field, s, "out of range (systemd refuses a TasksMax= of 0; leave it unset for no limit)", tasksExamples)
	}
	return TasksMax{Count: n}, nil
}

// ParseCPUQuota parses a CPUQuota= value: only a percentage, more than
// 0%, and no larger than systemd's parse_permyriad_unbounded reads.
func ParseCPUQuota(field, s string) (CPUQuota, error) {
	if s == "" {
		return CPUQuota{}, nil
	}
	if !strings.HasSuffix(s, "%") {
		return CPUQuota{}, refuseLimit(field, s, "not a CPU quota systemd accepts: it must end in %", cpuExamples)
	}
	p, err := parsePermyriad(s, math.MaxInt32)
	if err != nil || p == 0 {
		return CPUQuota{}, refuseLimit(field, s, fmt.Sprintf("not a CPU quota systemd accepts (more than 0%%, at most %s, at most two decimals)", Permyriad(maxCPUPermyriad)), cpuExamples)
	}
	return CPUQuota{Share: p}, nil
}

// maxCPUPermyriad is the largest value parse_permyriad_unbounded returns
// (an int): 21474836.47%.
const maxCPUPermyriad = math.MaxInt32

func refuseLimit(field, value, why, examples string) error {
	return protocol.Refuse(protocol.CodeConfiguration, "%s %q: %s; %s", field, value, why, examples)
}

// plainNumber reports whether s is decimal digits without a leading zero:
// systemd reads these counts with strtol's base 0, where "010" is eight.
func plainNumber(s string) bool {
	return allDigits(s) && (len(s) == 1 || s[0] != '0')
}

func allDigits(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if r < '0' || r > '9' {
			return false
		}
	}
	return true
}

// parsePermyriad reads "N%", "N.D%" or "N.DD%" with plain decimal digits
// (systemd's parse_permyriad without its ‰ and ‱ forms and without the
// leading whitespace, sign and 0x/0o/0b prefixes its safe_atoi lets
// through), at most limit.
func parsePermyriad(s string, limit uint64) (Permyriad, error) {
	num, ok := strings.CutSuffix(s, "%")
	if !ok {
		return 0, fmt.Errorf("no %%")
	}
	whole, frac, hasDot := strings.Cut(num, ".")
	if !plainNumber(whole) || hasDot && (len(frac) < 1 || len(frac) > 2 || !allDigits(frac)) {
		return 0, fmt.Errorf("not N%%, N.D%% or N.DD%%")
	}
	w, err := strconv.ParseUint(whole, 10, 64)
	if err != nil || w > limit/100 {
		return 0, fmt.Errorf("too large")
	}
	var q uint64
	if hasDot {
		q, _ = strconv.ParseUint(frac, 10, 64)
		if len(frac) == 1 {
			q *= 10
		}
	}
	v := w*100 + q
	if v > limit {
		return 0, fmt.Errorf("too large")
	}
	return Permyriad(v), nil
}

// sizeSuffixes are parse_size's base-1024 suffixes (upper case only, as
// systemd's table; "B" is a factor of one).
var sizeSuffixes = map[string]uint64{
	"": 1, "B": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40, "P": 1 << 50, "E": 1 << 60,
}

// parseSize reads one component of systemd's parse_size(…, 1024, …):
// digits, optionally a dot and digits, optionally one suffix. systemd
// also accepts whitespace, a sum of components ("1G 512M") and a leading
// "+"; those are refused here (a documented subset). The fraction is
// computed as systemd does, in a double, so 1.5G is the same number of
// bytes in both.
func parseSize(s string) (uint64, error) {
	i := 0
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		i++
	}
	if i == 0 {
		return 0, fmt.Errorf("no digits")
	}
	l, err := strconv.ParseUint(s[:i], 10, 64)
	if err != nil {
		return 0, err
	}
	var frac float64
	if i < len(s) && s[i] == '.' {
		j := i + 1
		for j < len(s) && s[j] >= '0' && s[j] <= '9' {
			j++
		}
		if j == i+1 {
			return 0, fmt.Errorf("no digits after the dot")
		}
		l2, err := strconv.ParseUint(s[i+1:j], 10, 64)
		if err != nil {
			return 0, err
		}
		frac = float64(l2)
		for k := i + 1; k < j; k++ {
			frac /= 10
		}
		i = j
	}
	factor, ok := sizeSuffixes[s[i:]]
	if !ok {
		return 0, fmt.Errorf("unknown suffix %q", s[i:])
	}
	extra := uint64(0)
	if frac > 0 {
		extra = 1
	}
	if l+extra > math.MaxUint64/factor {
		return 0, fmt.Errorf("too large")
	}
	fracBytes := uint64(frac * float64(factor))
	n := l*factor + fracBytes
	if n < l*factor {
		return 0, fmt.Errorf("too large")
	}
	return n, nil
}

// formatSize prints n with the largest suffix that divides it exactly,
// so the printed value reads back as the same number of bytes.
func formatSize(n uint64) string {
	for _, s := range []string{"E", "P", "T", "G", "M", "K"} {
		if f := sizeSuffixes[s]; n%f == 0 {
			return strconv.FormatUint(n/f, 10) + s
		}
	}
	return strconv.FormatUint(n, 10)
}

// String prints m normalized: "4G", "1536M", "10%", "infinity", or ""
// when unset.
func (m MemoryMax) String() string {
	switch {
	case m.Unlimited:
		return "infinity"
	case m.Share > 0:
		return m.Share.String()
	case m.Bytes > 0:
		return formatSize(m.Bytes)
	}
	return ""
}

// String prints t normalized.
func (t TasksMax) String() string {
	switch {
	case t.Unlimited:
		return "infinity"
	case t.Share > 0:
		return t.Share.String()
	case t.Count > 0:
		return strconv.FormatUint(t.Count, 10)
	}
	return ""
}

// String prints q normalized ("200%"), or "" when unset.
func (q CPUQuota) String() string {
	if q.Share == 0 {
		return ""
	}
	return q.Share.String()
}

// MarshalText writes the normalized value into the conversation file.
func (m MemoryMax) MarshalText() ([]byte, error) { return []byte(m.String()), nil }

// UnmarshalTOML parses the file's value: every load re-checks it. Only a
// string is read: a bare TOML number would be bytes to systemd and
// something else to whoever wrote it.
func (m *MemoryMax) UnmarshalTOML(v any) (err error) {
	s, ok := v.(string)
	if !ok {
		return refuseLimit("limits.memory_max", fmt.Sprint(v), "must be a quoted string", memoryExamples)
	}
	*m, err = ParseMemoryMax("limits.memory_max", s)
	return err
}

// MarshalText writes the normalized value into the conversation file.
func (t TasksMax) MarshalText() ([]byte, error) { return []byte(t.String()), nil }

// UnmarshalTOML parses the file's value. A file written before limits
// were typed holds an integer, where 0 meant unset.
func (t *TasksMax) UnmarshalTOML(v any) (err error) {
	switch v := v.(type) {
	case string:
		*t, err = ParseTasksMax("limits.tasks_max", v)
	case int64:
		if v == 0 {
			*t = TasksMax{}
			return nil
		}
		*t, err = ParseTasksMax("limits.tasks_max", strconv.FormatInt(v, 10))
	default:
		err = refuseLimit("limits.tasks_max", fmt.Sprint(v), "not a count or a string", tasksExamples)
	}
	return err
}

// MarshalText writes the normalized value into the conversation file.
func (q CPUQuota) MarshalText() ([]byte, error) { return []byte(q.String()), nil }

// UnmarshalTOML parses the file's value; only a string is read.
func (q *CPUQuota) UnmarshalTOML(v any) (err error) {
	s, ok := v.(string)
	if !ok {
		return refuseLimit("limits.cpu_quota", fmt.Sprint(v), "must be a quoted string", cpuExamples)
	}
	*q, err = ParseCPUQuota("limits.cpu_quota", s)
	return err
}
