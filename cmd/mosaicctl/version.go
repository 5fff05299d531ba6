package main

import (
	_ "embed"
	"strings"
)

// versionFile is the one place the version is written: `make deb` names the
// package after it and this binary reports it, however it was built (make,
// `go install`, a package), so the two can never disagree.
//
//go:embed version.txt
var versionFile string

var version = strings.TrimSpace(versionFile)
