package main

import (
	"fmt"
	"os"
	"runtime"

	"github.com/mosaic-agents/mosaic/conversations"
)

// limitsFromFlags parses the limit flags of conv add with systemd's
// syntax for each property; a refusal names the flag, the value and an
// example.
func limitsFromFlags(memory, tasks, cpu string) (conversations.Limits, error) {
	var l conversations.Limits
	var err error
	if l.MemoryMax, err = conversations.ParseMemoryMax("--memory-max", memory); err != nil {
		return l, err
	}
	if l.TasksMax, err = conversations.ParseTasksMax("--tasks-max", tasks); err != nil {
		return l, err
	}
	if l.CPUQuota, err = conversations.ParseCPUQuota("--cpu-quota", cpu); err != nil {
		return l, err
	}
	// systemd takes any quota up to 21474836.47%; one above every CPU of
	// this machine never binds, which is worth saying, not refusing (the
	// conversation may move to a larger machine).
	if n := runtime.NumCPU(); l.CPUQuota.Share > conversations.Permyriad(n*10000) {
		fmt.Fprintf(os.Stderr, "mosaicctl: note: --cpu-quota %s is more than the %d CPUs of this machine (%d%%): it never limits the engine here\n",
			l.CPUQuota, n, n*100)
	}
	return l, nil
}
