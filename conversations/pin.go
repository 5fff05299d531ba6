package conversations

import "github.com/mosaic-agents/mosaic/engine"

// Pin is the engine pin recorded in the conversation file, as
// engine.Check takes it.
func (e Engine) Pin() engine.Pin {
	return engine.Pin{Version: e.Version, Entry: e.Entry, SHA256: e.SHA256, PackageDir: e.PackageDir, PackageDigest: e.PackageDigest,
		Node: e.Node, NodeVersion: e.NodeVersion, NodeSHA256: e.NodeSHA256}
}
