package engine

// Spec is everything needed to start a sealed engine. The controller
// starts it (inside its systemd scope) with stdin and stdout as pipes that
// it hands to Engine.Open, and keeps stdin open for the engine's whole
// life.
type Spec struct {
	// Path is the program: for Pi the pinned Node, with the pinned entry
	// file as its first argument, so the bytes that run are the bytes
	// pinned, not whatever a pi symlink, wrapper or PATH points to later.
	Path string
	// Args is argv including argv[0].
	Args []string
	Env  []string
	Dir  string
}
