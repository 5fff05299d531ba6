package history

import "os"

// OpenRead opens path read-only with the session reader's safe-open rules
// (no symlink in the last two components, a regular file, no swap
// between lstat and open, at most max bytes) for another engine's reader.
// A missing file or directory returns (nil, nil): nothing written yet.
func OpenRead(path string, max int64) (*os.File, error) {
	src, err := openSafe(path, max)
	if err != nil || src == nil {
		return nil, err
	}
	return src.f, nil
}
