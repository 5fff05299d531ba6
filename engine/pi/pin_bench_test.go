package pi

import (
	"os"
	"path/filepath"
	"testing"
)

// realPackage returns the package directory of the pinned Pi named by
// MOSAIC_PI, skipping without it.
func realPackage(b *testing.B) string {
	b.Helper()
	wrapper := os.Getenv("MOSAIC_PI")
	if wrapper == "" {
		b.Skip("MOSAIC_PI is unset")
	}
	_, entry, err := readWrapper(wrapper)
	if err != nil || entry == "" {
		b.Fatalf("MOSAIC_PI %s is not an install.sh wrapper: %v", wrapper, err)
	}
	dir, _, err := findPackage(entry)
	if err != nil {
		b.Fatal(err)
	}
	return dir
}

// BenchmarkPackageDigest is conv add's full hash of the real Pi package
// and its dependency closure.
func BenchmarkPackageDigest(b *testing.B) {
	dir := realPackage(b)
	b.Setenv("XDG_STATE_HOME", b.TempDir())
	roots, err := packageRoots(dir, nil)
	if err != nil {
		b.Fatal(err)
	}
	entries, err := listTree(roots)
	if err != nil {
		b.Fatal(err)
	}
	var size int64
	for _, e := range entries {
		size += e.Size
	}
	b.ResetTimer()
	for range b.N {
		if _, err := PackageDigest(dir, ""); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(len(roots)), "packages")
	b.ReportMetric(float64(len(entries)), "files")
	b.ReportMetric(float64(size)/(1<<20), "MiB")
}

// BenchmarkPackageCheck is the check before each spawn with the manifest
// cached: a walk and an lstat of every file, no file read.
func BenchmarkPackageCheck(b *testing.B) {
	dir := realPackage(b)
	b.Setenv("XDG_STATE_HOME", b.TempDir())
	digest, err := PackageDigest(dir, "")
	if err != nil {
		b.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(os.Getenv("XDG_STATE_HOME"), "mosaic", "pins", digest+".stat")); err != nil {
		b.Fatalf("no manifest cached: %v", err)
	}
	b.ResetTimer()
	for range b.N {
		if err := checkPackageDigest(dir, "", digest); err != nil {
			b.Fatal(err)
		}
	}
}
