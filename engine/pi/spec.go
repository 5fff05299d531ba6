package pi

import (
	"fmt"
	"path/filepath"
	"strings"

	"github.com/mosaic-agents/mosaic/engine"
)

// Config is a conversation's engine configuration (its TOML, set by conv
// add flags) plus the paths known at launch.
type Config struct {
	Pin Pin
	// Seal holds the session file and the optional provider, model and
	// thinking level.
	Seal Seal
	// AgentDir is handed to the engine (engine.Spec.Dirs) and
	// PI_CODING_AGENT_DIR names it by its descriptor, when set; otherwise
	// Pi uses its own ~/.pi/agent.
	AgentDir string
	// ProjectRoot is the engine's working directory.
	ProjectRoot string
	// Extensions are the reviewed extension files, checked against their
	// pins before the spawn and passed as -e (Seal.Extensions is set
	// from them).
	Extensions []Extension
}

// envAllow are the variables passed from the controller's environment.
// Everything else (credentials, NODE_OPTIONS, proxies) is dropped.
var envAllow = []string{"PATH", "HOME", "USER", "LOGNAME", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "TMPDIR"}

// envForced are always set: no network checks, no update nag, no
// telemetry.
var envForced = []string{"PI_OFFLINE=1", "PI_SKIP_VERSION_CHECK=1", "PI_TELEMETRY=0"}

// Command checks the pin and the seal and returns the Spec for cfg.
// environ is the controller's environment (os.Environ()).
func Command(cfg Config, environ []string) (engine.Spec, error) {
	if err := Check(cfg.Pin); err != nil {
		return engine.Spec{}, err
	}
	cfg.Seal.Extensions = nil
	for _, e := range cfg.Extensions {
		if err := CheckExtension(e); err != nil {
			return engine.Spec{}, err
		}
		cfg.Seal.Extensions = append(cfg.Seal.Extensions, e.Path)
	}
	args, err := cfg.Seal.Args()
	if err != nil {
		return engine.Spec{}, err
	}
	if !filepath.IsAbs(cfg.ProjectRoot) {
		return engine.Spec{}, fmt.Errorf("engine spec: project root %q is not absolute", cfg.ProjectRoot)
	}
	env := Environ(environ)
	var dirs []string
	if cfg.AgentDir != "" {
		if !filepath.IsAbs(cfg.AgentDir) {
			return engine.Spec{}, fmt.Errorf("engine spec: agent dir %q is not absolute", cfg.AgentDir)
		}
		dirs = []string{cfg.AgentDir}
		env = append(env, "PI_CODING_AGENT_DIR="+engine.HandedDir(0))
	}
	// The pinned interpreter runs the pinned entry: never the entry's own
	// "#!/usr/bin/env node", which would take whatever node comes first
	// on the user manager's PATH (Check refused a pin without one).
	return engine.Spec{
		Path: cfg.Pin.Node,
		Args: append([]string{cfg.Pin.Node, cfg.Pin.Entry}, args...),
		Env:  env,
		Dir:  cfg.ProjectRoot,
		Dirs: dirs,
	}, nil
}

// Environ builds the engine environment from an allow-list of environ
// (XDG_* included) plus the forced Pi settings.
func Environ(environ []string) []string {
	var env []string
	for _, kv := range environ {
		k, _, ok := strings.Cut(kv, "=")
		if !ok || strings.HasPrefix(k, "PI_") {
			continue
		}
		if contains(envAllow, k) || strings.HasPrefix(k, "XDG_") {
			env = append(env, kv)
		}
	}
	return append(env, envForced...)
}
