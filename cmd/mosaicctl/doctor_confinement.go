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
	return fmt.Sprintf("engines run in their own %s namespaces; masked %s", strings.Join(ns, ", "), strings.Join(c.Masked, " ")), nil
}
