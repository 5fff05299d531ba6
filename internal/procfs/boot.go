package procfs

import (
	"fmt"
	"os"
	"strings"
)

// BootID reads /proc/sys/kernel/random/boot_id: a lowercase UUID that
// changes with every boot, so pids and start times recorded under another
// boot id describe no process of this one.
func BootID() (string, error) {
	b, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return "", fmt.Errorf("read boot id: %w", err)
	}
	return strings.TrimSpace(string(b)), nil
}
