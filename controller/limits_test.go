package controller

import (
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mosaic-agents/mosaic/contrib/sandboxtest"
	"github.com/mosaic-agents/mosaic/conversations"
	"github.com/mosaic-agents/mosaic/internal/limitcases"
	"github.com/mosaic-agents/mosaic/scopes"
	"golang.org/x/sys/unix"
)

// TestLimitsReadBackFromSystemd sets every accepted value of the limits
// table on a real transient scope (the controller's own mapping, through
// scopes.Launch) and reads MemoryMax, TasksMax and CPUQuotaPerSecUSec back
// over D-Bus: each is the number computed here, percentages resolved the
// way systemd resolves them (physical_memory_scale, system_tasks_max_scale).
func TestLimitsReadBackFromSystemd(t *testing.T) {
	sandboxtest.Require(t)
	var mem, tasks, cpu []limitcases.Case
	for _, tc := range limitcases.Table() {
		switch {
		case tc.Norm == "":
		case tc.Field == "memory-max":
			mem = append(mem, tc)
		case tc.Field == "tasks-max":
			tasks = append(tasks, tc)
		case tc.Field == "cpu-quota":
			cpu = append(cpu, tc)
		}
	}
	mgr := scopes.NewManager(scopes.Config{})
	t.Cleanup(mgr.Close)
	n := max(len(mem), len(tasks), len(cpu))
	for i := range n {
		m, k, q := mem[i%len(mem)], tasks[i%len(tasks)], cpu[i%len(cpu)]
		l := conversations.Limits{MemoryMax: m.Memory, TasksMax: k.Tasks, CPUQuota: q.CPU}
		t.Run(fmt.Sprintf("%s,%s,%s", m.In, k.In, q.In), func(t *testing.T) {
			a := launchApplied(t, mgr, l)
			if want := wantMemory(t, m.Memory); a.MemoryMax != want {
				t.Errorf("MemoryMax=%s reads back %d, want %d", m.In, a.MemoryMax, want)
			}
			if want := wantTasks(t, k.Tasks); a.TasksMax != want {
				t.Errorf("TasksMax=%s reads back %d, want %d", k.In, a.TasksMax, want)
			}
			if want := q.CPU.PerSecUSec(); a.CPUQuotaPerSecUSec != want {
				t.Errorf("CPUQuota=%s reads back %d usec/s, want %d", q.In, a.CPUQuotaPerSecUSec, want)
			}
		})
	}
}

// launchApplied launches a held no-op engine in a scope with l's limits
// and returns what systemd reports for it.
func launchApplied(t *testing.T, mgr *scopes.Manager, l conversations.Limits) scopes.Applied {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	h, err := mgr.Launch(ctx, scopes.Spec{Conversation: "limits-" + strings.ReplaceAll(t.Name(), "/", "_"), Execution: newID("e-"),
		Argv: []string{"sleep", "300"}, Stderr: os.Stderr, Resources: resourcesOf(l)})
	if err != nil {
		t.Fatalf("launch with %+v: %v", l, err)
	}
	t.Cleanup(func() {
		h.Abandon(context.Background())
		h.Close()
	})
	a, err := mgr.Applied(ctx, h.Cohort.Unit)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func wantMemory(t *testing.T, m conversations.MemoryMax) uint64 {
	switch {
	case m.Unlimited:
		return math.MaxUint64
	case m.Share > 0:
		return physicalMemoryScale(t, uint64(m.Share.Scale()), math.MaxUint32)
	}
	return m.Bytes
}

func wantTasks(t *testing.T, k conversations.TasksMax) uint64 {
	switch {
	case k.Unlimited:
		return math.MaxUint64
	case k.Share > 0:
		return systemTasksMaxScale(t, uint64(k.Share.Scale()), math.MaxUint32)
	}
	return k.Count
}

// physicalMemoryScale is systemd's: physical memory (capped by the
// memory.max of the manager's root cgroup) in pages, times v/max, in
// bytes.
func physicalMemoryScale(t *testing.T, v, max uint64) uint64 {
	ps := uint64(os.Getpagesize())
	var si unix.Sysinfo_t
	if err := unix.Sysinfo(&si); err != nil {
		t.Fatal(err)
	}
	mem := uint64(si.Totalram) * uint64(si.Unit)
	if lim, ok := rootCgroupLimit(t, "memory.max"); ok {
		mem = min(mem, lim/ps*ps)
	}
	if v == max {
		return mem
	}
	return mem / ps * v / max * ps
}

// systemTasksMaxScale is systemd's: the least of TASKS_MAX, threads-max,
// pid_max-1 and the root cgroup's pids.max, times v/max.
func systemTasksMaxScale(t *testing.T, v, max uint64) uint64 {
	const tasksMax = 4194303
	limit := uint64(tasksMax)
	if n, err := readUint("/proc/sys/kernel/threads-max"); err == nil && n > 0 {
		limit = min(limit, n)
	}
	if n, err := readUint("/proc/sys/kernel/pid_max"); err == nil && n > 1 {
		limit = min(limit, n-1)
	}
	if n, ok := rootCgroupLimit(t, "pids.max"); ok && n > 0 {
		limit = min(limit, n)
	}
	if v == max {
		return limit
	}
	return limit * v / max
}

// rootCgroupLimit reads attr of PID 1's cgroup without its /init.scope,
// as systemd's cg_get_root_path finds it; false when it is "max" or
// absent.
func rootCgroupLimit(t *testing.T, attr string) (uint64, bool) {
	b, err := os.ReadFile("/proc/1/cgroup")
	if err != nil {
		t.Fatal(err)
	}
	root := strings.TrimSuffix(strings.TrimPrefix(strings.TrimSpace(string(b)), "0::"), "/init.scope")
	n, err := readUint(filepath.Join("/sys/fs/cgroup", root, attr))
	return n, err == nil
}

func readUint(path string) (uint64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	return strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
}
