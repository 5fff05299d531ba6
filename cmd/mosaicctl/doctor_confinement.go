package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/mosaic-agents/mosaic/scopes"
)

// checkConfinement sets up an engine's confinement in a throwaway child,
// exactly as a launch does.
func checkConfinement(ctx context.Context) (string, error) {
	c, err := scopes.ProbeConfinement(ctx)
	if err != nil {
		return "", err
	}
	var ns []string
	for _, n := range c.Namespaces {
		ns = append(ns, n.Type)
	}
	scopes := "scoped " + strings.Join(c.Scoped, " ")
	if len(c.Scoped) == 0 {
		scopes = "abstract Unix sockets and signals outside are reachable: " + c.Unscoped
	}
	return fmt.Sprintf("engines run in their own %s namespaces; masked %s; %s", strings.Join(ns, ", "), strings.Join(c.Masked, " "), scopes), nil
}
