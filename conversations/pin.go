package conversations

import "github.com/mosaic-agents/mosaic/engine"

// Pin is the engine pin recorded in the conversation file, as
// engine.Check takes it.
func (e Engine) Pin() engine.Pin {
	return engine.Pin{Version: e.Version, Entry: e.Entry, SHA256: e.SHA256, PackageDir: e.PackageDir, PackageDigest: e.PackageDigest,
		Node: e.Node, NodeVersion: e.NodeVersion, NodeSHA256: e.NodeSHA256}
}

// Pins returns the extension pins as engine.Command checks them.
func (e Engine) Pins() []engine.Extension {
	var out []engine.Extension
	for _, x := range e.Extensions {
		out = append(out, engine.Extension{Path: x.Path, SHA256: x.SHA256})
	}
	return out
}
