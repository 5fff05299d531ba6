package conversations

import "github.com/mosaic-agents/mosaic/engine/pi"

// Pin is the engine pin recorded in the conversation file, as
// pi.Check takes it.
func (e Engine) Pin() pi.Pin {
	return pi.Pin{Version: e.Version, Entry: e.Entry, SHA256: e.SHA256, PackageDir: e.PackageDir, PackageDigest: e.PackageDigest,
		Node: e.Node, NodeVersion: e.NodeVersion, NodeSHA256: e.NodeSHA256}
}

// Pins returns the extension pins as pi.Command checks them.
func (e Engine) Pins() []pi.Extension {
	var out []pi.Extension
	for _, x := range e.Extensions {
		out = append(out, pi.Extension{Path: x.Path, SHA256: x.SHA256})
	}
	return out
}
