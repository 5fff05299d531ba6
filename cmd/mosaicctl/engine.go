package main

import (
	"cmp"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"

	"github.com/mosaic-agents/mosaic/conversations"
	"github.com/mosaic-agents/mosaic/engine/pi"
	"github.com/mosaic-agents/mosaic/protocol"
)

// pinEngine resolves the engine named by --engine (default: pi from PATH)
// and pins it: package version, SHA-256 of its entry file, digest of the
// package and its dependencies, and the interpreter (--node, else the
// one the wrapper or the entry's #! line finds on this PATH, the user's
// own, not the user manager's). A conversation without an engine can be
// observed but never launched, so a missing default is no refusal: it
// leaves cv.Engine.Path empty, and conv add warns once the conversation is
// saved (noPiWarning).
func pinEngine(cv *conversations.Conversation, flag, node string) error {
	name := flag
	if name == "" {
		name = "pi"
	}
	p, err := exec.LookPath(name)
	if err != nil {
		if flag == "" && errors.Is(err, exec.ErrNotFound) {
			return nil
		}
		return protocol.Wrap(protocol.CodeConfiguration, err,
			"--engine %q is not an executable: name the `pi` executable or its entry file (`command -v pi` prints where it is)", name)
	}
	if p, err = filepath.Abs(p); err != nil {
		return fmt.Errorf("--engine %q: %w", name, err)
	}
	if node != "" {
		if node, err = exec.LookPath(node); err != nil {
			return protocol.Wrap(protocol.CodeConfiguration, err,
				"--node %q is not an executable: name the Node binary to run the engine with (`command -v node` prints where it is)", node)
		}
		if node, err = filepath.Abs(node); err != nil {
			return fmt.Errorf("--node: %w", err)
		}
	}
	pin, err := pi.Resolve(p, pi.ResolveOptions{Node: node, PATH: os.Getenv("PATH")})
	if err != nil {
		return fmt.Errorf("--engine %q: %w", p, err)
	}
	cv.Engine.Path = p
	cv.Engine.Version, cv.Engine.SHA256 = pin.Version, pin.SHA256
	cv.Engine.Entry, cv.Engine.PackageDir, cv.Engine.PackageDigest = pin.Entry, pin.PackageDir, pin.PackageDigest
	cv.Engine.Node, cv.Engine.NodeVersion, cv.Engine.NodeSHA256 = pin.Node, pin.NodeVersion, pin.NodeSHA256
	return nil
}

// pinExtensions pins each reviewed extension file by real path and
// SHA-256; the same file twice is refused (Pi would load it twice).
func pinExtensions(cv *conversations.Conversation, files []string) error {
	for _, f := range files {
		e, err := pi.PinExtension(f)
		if err != nil {
			return err
		}
		for _, have := range cv.Engine.Extensions {
			if have.Path == e.Path {
				return protocol.Refuse(protocol.CodeUsage, "--extension %s names %s a second time", f, e.Path)
			}
		}
		cv.Engine.Extensions = append(cv.Engine.Extensions, conversations.Extension{Path: e.Path, SHA256: e.SHA256})
	}
	return nil
}

// noPiWarning is what conv add says of a conversation it saved without an
// engine because no pi was on PATH. The fix is noEngineHint's conv add
// line, --replace included: added again without it, the conversation
// exists and the add is refused conversation-exists. It is built from the
// stored settings, so it is said after the save.
func noPiWarning(id string) string {
	return "mosaicctl: warning: no pi on PATH; " + cmp.Or(noEngineHint(id, nil),
		fmt.Sprintf("conversation %s has no engine; add one with `mosaicctl conv add --engine PATH --replace` and the flags you gave (PATH: the pi executable)", id))
}
