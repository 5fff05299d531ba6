package atomicfile

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/mosaic-agents/mosaic/internal/ids"
)

// Fault points of WriteOnce, in the order a write passes them. A fault hook
// sees each; a non-nil return is that step failing (an injected EROFS or
// ENOSPC), and a hook may also kill the process to model a crash.
const (
	FaultTempCreated = "temp-created" // temp file created, empty
	FaultTempWritten = "temp-written" // temp file written, not fsynced
	FaultTempSynced  = "temp-synced"  // temp file fsynced, final name not linked
	FaultLinked      = "linked"       // final name linked, directory not fsynced
	FaultDirSynced   = "dir-synced"   // the file is durable under its name
)

// Fault is a test hook called at every fault point with the path concerned.
type Fault func(point, path string) error

// ErrExists is WriteOnce losing the exclusive create: final already names
// a file, written by another writer first.
var ErrExists = errors.New("write-once file already exists")

// WriteOnce publishes data under final exactly once: the bytes go to a
// fresh temp file beside it (O_EXCL|O_CREAT|O_WRONLY) that is written fully
// and fsynced, then link(2) gives it its final name, failing with ErrExists
// if that name exists, and the directory is fsynced. A final name therefore
// only ever names a complete file, and never a second time; the exclusive
// link is the only lock. A crash can leave a stale ".*.tmp" temp file, which
// readers ignore. fault may be nil.
func WriteOnce(final string, data []byte, fault Fault) error {
	if fault == nil {
		fault = func(string, string) error { return nil }
	}
	dir := filepath.Dir(final)
	tmp := filepath.Join(dir, fmt.Sprintf(".%s.%d.%s.tmp", filepath.Base(final), os.Getpid(), ids.Hex(8)))
	if err := writeTemp(tmp, data, fault); err != nil {
		os.Remove(tmp)
		return err
	}
	if err := fault(FaultTempSynced, final); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("create %q: %w", final, err)
	}
	err := os.Link(tmp, final)
	os.Remove(tmp)
	if errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("create %q: %w", final, ErrExists)
	}
	if err != nil {
		return fmt.Errorf("create %q: %w", final, err)
	}
	if err := fault(FaultLinked, final); err != nil {
		return fmt.Errorf("sync %q: %w", final, err)
	}
	if err := SyncDir(dir); err != nil {
		return fmt.Errorf("sync %q: %w", final, err)
	}
	return fault(FaultDirSynced, final)
}

func writeTemp(tmp string, data []byte, fault Fault) error {
	f, err := os.OpenFile(tmp, os.O_EXCL|os.O_CREATE|os.O_WRONLY, 0o600)
	if err != nil {
		return fmt.Errorf("create temp file %q: %w", tmp, err)
	}
	defer f.Close()
	if err := fault(FaultTempCreated, tmp); err != nil {
		return fmt.Errorf("write temp file %q: %w", tmp, err)
	}
	if _, err := f.Write(data); err != nil {
		return fmt.Errorf("write temp file %q: %w", tmp, err)
	}
	if err := fault(FaultTempWritten, tmp); err != nil {
		return fmt.Errorf("sync temp file %q: %w", tmp, err)
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("sync temp file %q: %w", tmp, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("close temp file %q: %w", tmp, err)
	}
	return nil
}

// MakeDir creates dir (0700) if it is missing and makes its creation
// durable by fsyncing its parent and each of the ancestors given (the
// roots whose entries MkdirAll may have created).
func MakeDir(dir string, ancestors ...string) error {
	if _, err := os.Stat(dir); err == nil {
		return nil
	}
	parent := filepath.Dir(dir)
	if err := os.MkdirAll(parent, 0o700); err != nil {
		return fmt.Errorf("create directory %q: %w", parent, err)
	}
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("create directory %q: %w", dir, err)
	}
	for _, d := range append([]string{parent}, ancestors...) {
		if err := SyncDir(d); err != nil {
			return fmt.Errorf("create directory %q: %w", dir, err)
		}
	}
	return nil
}
