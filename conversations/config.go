package conversations

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/mosaic-agents/mosaic/internal/devices"
	"github.com/mosaic-agents/mosaic/internal/shape"
	"github.com/mosaic-agents/mosaic/protocol"
)

// Conversation is one registered conversation, as stored in its TOML file.
type Conversation struct {
	ID        string `toml:"id"`
	Project   string `toml:"project"`
	Seat      string `toml:"seat"`
	Workspace string `toml:"workspace"`
	Session   string `toml:"session"`
	Engine    Engine `toml:"engine"`
	Limits    Limits `toml:"limits"`
	// IdleStop is the idle policy (`conv add --idle-stop`): a Go duration
	// after which an idle conversation hibernates (its engine ends with a
	// proof, its controller exits, the next client wakes it); empty is
	// off, the default.
	IdleStop string `toml:"idle_stop,omitempty"`
	// EngineKind is "pi" (the default, also when empty) or "claude"; a
	// Claude conversation has its engine in Claude and no session file.
	EngineKind string  `toml:"engine_kind,omitempty"`
	Claude     *Claude `toml:"claude,omitempty"`
	// Devices are host devices the engine's tools may open besides the
	// plain ones (`conv add --device`: a GPU's render node, /dev/kvm),
	// each an absolute path below /dev; the engine's /dev has no other.
	Devices []string `toml:"devices,omitempty"`
}

// MinIdleStop is the shortest idle policy accepted.
const MinIdleStop = time.Second

// IdleStopDuration returns the idle policy's duration, 0 when off.
func (c *Conversation) IdleStopDuration() time.Duration {
	d, err := time.ParseDuration(c.IdleStop)
	if err != nil {
		return 0
	}
	return d
}

// Engine is the pinned engine a conversation runs and its plain options.
type Engine struct {
	// Path is the absolute path of the `pi` executable or its entry file.
	Path string `toml:"path"`
	// Version, SHA256, Entry, PackageDir, PackageDigest and the Node
	// fields pin the engine at add time (pi.Resolve); a launch whose
	// engine no longer matches refuses engine-pin-mismatch. Node is the
	// interpreter the engine runs with (argv[0]), NodeVersion its
	// `node --version`, NodeSHA256 its bytes; PackageDigest covers every
	// file the package and its dependencies hold.
	Version       string `toml:"version"`
	SHA256        string `toml:"sha256"`
	Entry         string `toml:"entry"`
	PackageDir    string `toml:"package_dir"`
	PackageDigest string `toml:"package_digest"`
	Node          string `toml:"node"`
	NodeVersion   string `toml:"node_version"`
	NodeSHA256    string `toml:"node_sha256"`
	Provider      string `toml:"provider"`
	Model         string `toml:"model"`
	Thinking      string `toml:"thinking"`
	// AgentDir is passed as PI_CODING_AGENT_DIR; empty means Pi's default.
	AgentDir string `toml:"agent_dir"`
	// Extensions are the reviewed extension files admitted into the seal,
	// each pinned by real path and SHA-256 (pi.PinExtension) and
	// checked before every spawn.
	Extensions []Extension `toml:"extensions,omitempty"`
}

// Extension is one pinned extension file.
type Extension struct {
	Path   string `toml:"path"`
	SHA256 string `toml:"sha256"`
}

// DefaultWorkspace is the workspace of a conversation added without one.
const DefaultWorkspace = "default"

// validName reports whether s is a seat, workspace or session name: 1 to
// 64 bytes of ASCII letters, digits and . _ -, the first a letter or digit.
func validName(s string) bool { return shape.Token(s, 1, 64, shape.Alnum, nameByte) }

func nameByte(b byte) bool { return shape.Alnum(b) || b == '.' || b == '_' || b == '-' }

// validSHA256 reports whether s is a SHA-256 in lowercase hex.
func validSHA256(s string) bool { return shape.Hex(s, 64) }

// ID returns the conversation id for a project root, seat and session file
// name (with its .jsonl suffix).
func ID(project, seat, sessionName string) string {
	h := sha256.Sum256([]byte(project + "\x00" + seat + "\x00" + sessionName))
	return "pi-" + hex.EncodeToString(h[:])[:20]
}

// ValidID reports whether id has the shape of a conversation id. Checking
// it before any path is built keeps an id from naming another file.
func ValidID(id string) bool { return len(id) == 23 && id[:3] == "pi-" && shape.Hex(id[3:], 20) }

// SessionPath returns where a seat's session file must live.
func SessionPath(project, seat, name string) string {
	return filepath.Join(project, ".pi", "state", seat, "sessions", name)
}

// Validate checks c's fields without touching the filesystem.
func (c *Conversation) Validate() error {
	if err := c.validateCommon(); err != nil {
		return err
	}
	if err := c.validateKind(); err != nil || c.IsClaude() {
		return err
	}
	return c.validatePi()
}

// validateCommon checks the fields every engine kind has.
func (c *Conversation) validateCommon() error {
	if !filepath.IsAbs(c.Project) || filepath.Clean(c.Project) != c.Project {
		return refuseField("project", c.Project, "must be an absolute, clean path (as `realpath DIR` prints it)")
	}
	if !validName(c.Seat) {
		return refuseField("seat", c.Seat, "must be 1-64 of [A-Za-z0-9._-], starting with a letter or digit")
	}
	if !validName(c.Workspace) {
		return refuseField("workspace", c.Workspace, "must be 1-64 of [A-Za-z0-9._-], starting with a letter or digit")
	}
	if err := c.Limits.validate(); err != nil {
		return err
	}
	if c.IdleStop != "" {
		if d, err := time.ParseDuration(c.IdleStop); err != nil || d < MinIdleStop {
			return refuseField("idle_stop", c.IdleStop, "must be a duration of at least 1s, such as 30m or 2h (or empty: off)")
		}
	}
	if _, err := devices.Check(c.Devices); err != nil {
		return refuseField("devices", strings.Join(c.Devices, " "), fmt.Sprintf("%v; each must be a device node's clean path below /dev, such as /dev/dri/renderD128, other than the engine's own ptys, shared memory and queues, at most %d", err, devices.Max))
	}
	return nil
}

// validatePi checks a Pi conversation's session file and [engine].
func (c *Conversation) validatePi() error {
	if !filepath.IsAbs(c.Session) || filepath.Clean(c.Session) != c.Session {
		return refuseField("session", c.Session, "must be an absolute, clean path")
	}
	name := filepath.Base(c.Session)
	stem, ok := strings.CutSuffix(name, ".jsonl")
	if !ok || !validName(stem) {
		return refuseField("session", c.Session, "the file name must be NAME.jsonl with NAME of [A-Za-z0-9._-]")
	}
	if want := SessionPath(c.Project, c.Seat, name); c.Session != want {
		return refuseField("session", c.Session, "must sit at "+want)
	}
	if want := ID(c.Project, c.Seat, name); c.ID != want {
		return refuseField("id", c.ID, "does not match the project, seat and session ("+want+"); re-add the conversation")
	}
	if c.Engine.Path != "" && !filepath.IsAbs(c.Engine.Path) {
		return refuseField("engine.path", c.Engine.Path, "must be absolute")
	}
	if c.Engine.Node != "" && !filepath.IsAbs(c.Engine.Node) {
		return refuseField("engine.node", c.Engine.Node, "must be absolute")
	}
	if c.Engine.AgentDir != "" && !filepath.IsAbs(c.Engine.AgentDir) {
		return refuseField("engine.agent_dir", c.Engine.AgentDir, "must be absolute")
	}
	for _, e := range c.Engine.Extensions {
		if !filepath.IsAbs(e.Path) || filepath.Clean(e.Path) != e.Path {
			return refuseField("engine.extensions.path", e.Path, "must be a clean absolute path; add the conversation again with --extension FILE")
		}
		if !validSHA256(e.SHA256) {
			return refuseField("engine.extensions.sha256", e.SHA256, "must be 64 lowercase hex digits; add the conversation again with --extension FILE")
		}
	}
	return nil
}

func refuseField(field, value, fix string) error {
	return protocol.Refuse(protocol.CodeConfiguration, "%s %q: %s", field, value, fix)
}

// Same reports whether c and o hold the same settings.
func (c *Conversation) Same(o *Conversation) bool {
	if !slices.Equal(c.Engine.Extensions, o.Engine.Extensions) {
		return false
	}
	if (c.Claude == nil) != (o.Claude == nil) || c.Claude != nil && *c.Claude != *o.Claude {
		return false
	}
	a, b := *c, *o
	a.Engine.Extensions, b.Engine.Extensions = nil, nil
	a.Claude, b.Claude = nil, nil
	return reflect.DeepEqual(a, b)
}
