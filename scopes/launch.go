package scopes

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sync"
	"time"

	sddbus "github.com/coreos/go-systemd/v22/dbus"

	"github.com/mosaic-agents/mosaic/internal/userbus"
	"github.com/mosaic-agents/mosaic/proofs"
)

// Sub-cgroups of every scope (the scope is delegated, Delegate=yes).
const (
	EngineSubgroup = proofs.EngineSubgroup // "engine": the engine and every process it spawns
	AnchorSubgroup = "anchor"              // the anchor that keeps the scope alive during a stop
)

// Config configures a Manager. The zero value is usable.
type Config struct {
	// BusAddress is the user bus; "" means $DBUS_SESSION_BUS_ADDRESS, else
	// unix:path=$XDG_RUNTIME_DIR/bus.
	BusAddress string
	// Slice the scopes go in; "" means app-mosaic.slice (below app.slice of
	// the user manager).
	Slice string
	// Fallback allows launching in a process group when no user manager
	// answers. Such a cohort's stops can end uncertain, never stopped.
	Fallback bool
	// JobTimeout bounds the wait for the scope's start job; 0 means 10 s.
	JobTimeout time.Duration
	// CgroupMount is the cgroup2 mount; "" means found in mountinfo.
	CgroupMount string
	// NoConfinement launches engines without their own namespaces (for a
	// tool that needs the user bus, say). Every stop of such an engine
	// ends uncertain, never stopped: nothing shows its descendants stayed.
	NoConfinement bool
}

// Resources are the scope's resource-control properties, from the
// conversation config. Zero means unset. Where no controller is enabled
// (a hybrid host, the test sandbox) systemd accepts them without enforcing.
type Resources struct {
	MemoryMax uint64  // bytes (MemoryMax=); math.MaxUint64 is infinity
	TasksMax  uint64  // processes and threads (TasksMax=); math.MaxUint64 is infinity
	CPUQuota  float64 // percent of one CPU, 150 = CPUQuota=150% (CPUQuotaPerSecUSec)
	// MemoryMaxScale and TasksMaxScale are a share of physical memory or
	// of the system's task limit, math.MaxUint32 = 100%, which systemd
	// resolves as it does MemoryMax=10% (systemd-run sends the same).
	MemoryMaxScale uint32
	TasksMaxScale  uint32
	// CPUQuotaPerSecUSec, when set, is sent instead of CPUQuota: exact,
	// where a float percent may round down a microsecond.
	CPUQuotaPerSecUSec uint64
}

// Spec says what to launch.
type Spec struct {
	Conversation string
	Execution    string
	Description  string   // unit Description; "" gives a default
	Argv         []string // argv[0] is looked up in $PATH
	Env          []string // nil means this process's environment
	Dir          string   // "" means this process's working directory
	// Dirs are directories handed to the engine as descriptors, the i-th
	// at 3+i (engine.HandedDir names it), opened before the confinement:
	// a directory under Hide stays the engine's to reach through its
	// descriptor, where its tools, which the tool shell does not hand it
	// on to, find the mask.
	Dirs []string
	// Sealed are files inside Dirs that a confined engine may read but
	// neither write, replace nor remove, while the rest of their
	// directory stays its to write: Pi's auth.json, whose api_key values
	// beginning with "!" Pi runs as commands in its own domain, and which
	// Pi's own write tool would otherwise reach through its descriptor.
	// Each must exist, a regular file; the confinement report names
	// each in ReadOnly. An unconfined engine has no mounts of its own:
	// nothing is sealed, as nothing else is.
	Sealed []string
	// Stderr receives the engine's stderr; nil means a pipe whose read end
	// is Handle.Stderr (the caller must drain it).
	Stderr    *os.File
	Resources Resources
	// Hide are directories of the caller's own state the engine must
	// neither read nor write (the claims, the queue, the conversations'
	// settings): a tool that could write there would forge a claim or a
	// queued prompt and act with the user's authority; and files no engine
	// may read (another conversation's key). Each is masked like the
	// sockets when the engine is confined, and one missing is made (a
	// directory, 0700) first, so one created after the launch is hidden
	// too.
	Hide []string
	// Keep are directories under a hidden one that the engine still
	// reaches, and nothing else there: the conversation's own Claude
	// configuration directory or Pi agent directory inside the directory
	// that holds every conversation's. Each must exist; it is bound back
	// into the mask at the same path.
	Keep []string
	// ReadOnly are the user's files and directories that other
	// conversations' engines read through the controller (Pi's agent
	// directories, a Claude conversation's env file): the engine may read
	// them but neither change, replace nor add to them, so a tool cannot
	// point another conversation's traffic elsewhere. Each is bound
	// read-only onto itself when the engine is confined; one missing is
	// left absent (the caller makes what must exist).
	ReadOnly []string
	// Writable are files and directories under a ReadOnly directory
	// bound back writable, in place: Pi's sessions directory, where it
	// keeps the sessions of its own runs outside mosaic. One missing is
	// left so.
	Writable []string
	// Devices are host devices the engine's own /dev holds besides the
	// plain ones (privateDev), each an absolute path under /dev to a
	// character device, at the same path: a GPU's render node for a
	// tool's CUDA, /dev/kvm for a tool's VM. Every tool may open them.
	// One missing, or no character device, is left out (the report
	// names it absent).
	Devices []string
	// BeforeRelease, if set, is called once the cohort is confirmed and
	// before the engine may exec: the controller records the incarnation
	// (the claim's `active` revision) here. An error aborts the launch and
	// the engine never runs.
	BeforeRelease func(Cohort) error
}

// Manager launches and stops engines. Make one per process: it holds the
// one lazily dialled user-bus connection, the cgroup2 mount handle and,
// from its first stop, the unit holder's own bus connection.
type Manager struct {
	cfg    Config
	bus    bus
	holder *userbus.Holder // references on units while they are stopped (hold.go)

	mu sync.Mutex
	cg *cgroupFS

	probeMu      sync.Mutex
	probed       bool // a probe showed engines can be confined here
	probedByMark bool // ... one of an earlier process (probemark.go)

	fdOnce      sync.Once
	fdsReserved chan struct{} // closed once reserveFDs has grown the table

	extraProps []sddbus.Property // tests only: e.g. a dependency that fails or hangs the job
	faults     faults            // tests only
}

// NewManager returns a Manager; nothing is dialled or opened until used.
func NewManager(cfg Config) *Manager {
	if cfg.Slice == "" {
		cfg.Slice = "app-mosaic.slice"
	}
	if cfg.JobTimeout <= 0 {
		cfg.JobTimeout = 10 * time.Second
	}
	return &Manager{cfg: cfg, bus: newBus(cfg.BusAddress), holder: userbus.NewHolder(cfg.BusAddress), fdsReserved: make(chan struct{})}
}

// Close drops the bus connection and the cgroup2 handle.
func (m *Manager) Close() {
	m.bus.close()
	m.holder.Close()
	m.mu.Lock()
	m.cg.close()
	m.cg = nil
	m.mu.Unlock()
}

func (m *Manager) cgroupFS() (*cgroupFS, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.cg == nil {
		c, err := openCgroupFS(m.cfg.CgroupMount)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrCgroupAbsent, err)
		}
		m.cg = c
	}
	return m.cg, nil
}

// UnitName is the scope unit of one execution:
// mosaic-engine-<conversation>-<execution>.scope, each part escaped as
// systemd-escape does (so a '-' inside a part is \x2d and the name is
// unambiguous).
func UnitName(conversation, execution string) (string, error) {
	return proofs.EngineUnit(conversation, execution)
}

// Launch starts spec's engine. It creates the scope over the user bus with
// the engine parked as a held child, waits for the start job to be done,
// moves the child into the scope's engine cgroup, confirms
// /proc/<pid>/cgroup and only then lets the child exec the engine. Without
// a user manager it falls back to a process group if Config.Fallback, else
// it fails with ErrNoUserManager.
func (m *Manager) Launch(ctx context.Context, spec Spec) (*Handle, error) {
	name, err := UnitName(spec.Conversation, spec.Execution)
	if err != nil {
		return nil, err
	}
	if len(spec.Argv) == 0 {
		return nil, errors.New("launch: empty argv")
	}
	exe, err := exec.LookPath(spec.Argv[0])
	if err != nil {
		return nil, fmt.Errorf("launch: %w", err)
	}
	for _, p := range slices.Concat(spec.Dirs, spec.Sealed) {
		if !filepath.IsAbs(p) || filepath.Clean(p) != p {
			return nil, fmt.Errorf("launch: handed or sealed path %q is not absolute and clean", p)
		}
	}
	env := spec.Env
	if env == nil {
		env = os.Environ()
	}
	rel := release{Path: exe, Argv: spec.Argv, Env: env, Dirs: spec.Dirs, Sealed: spec.Sealed}
	if _, err := m.bus.get(ctx); err != nil {
		if !errors.Is(err, ErrNoUserManager) || !m.cfg.Fallback {
			return nil, err
		}
		return m.launchGroup(spec, rel, err)
	}
	return m.launchScope(ctx, spec, name, rel)
}
