package units

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// The service unit runs the binary whose path install recorded in
// ExecStart=, so that path must outlive the command that wrote it.
// CheckBinary sorts a path (absolute, symlinks resolved) into three:
//
//   - a temporary build (`go run`, `go test`: a go-build directory of the
//     temp dir or of the build cache) disappears when that command ends,
//     and every unit would fail to start: refused;
//   - a binary inside a source checkout (a directory with go.mod and .git
//     above it, such as the clone's .build/bin) works until the clone is
//     moved or `make clean` runs: a warning naming the fix;
//   - anything else (make install's PREFIX/bin, a package) is stable.
func CheckBinary(path string) (warning string, err error) {
	for dir := filepath.Dir(path); ; dir = filepath.Dir(dir) {
		if strings.HasPrefix(filepath.Base(dir), "go-build") {
			return "", fmt.Errorf("%s is a temporary build (%s is removed when `go run` or `go test` ends), "+
				"and the units would name a binary that is gone: build it (`make build`) or install it (`make install PREFIX=~/.local`) and run that", path, dir)
		}
		if isCheckout(dir) {
			return fmt.Sprintf("the units will run %s, inside the source checkout %s: moving the checkout or `make clean` breaks them. "+
				"For a lasting install: `make install PREFIX=~/.local` (or /usr/local as root), then `~/.local/bin/mosaicctl install`", path, dir), nil
		}
		if dir == filepath.Dir(dir) {
			return "", nil
		}
	}
}

// isCheckout reports whether dir is the root of a Go source checkout.
func isCheckout(dir string) bool {
	for _, name := range []string{"go.mod", ".git"} {
		if _, err := os.Lstat(filepath.Join(dir, name)); err != nil {
			return false
		}
	}
	return true
}
