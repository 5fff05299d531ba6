package scopes

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path"
	"strings"
	"sync"
	"time"

	sddbus "github.com/coreos/go-systemd/v22/dbus"
	"github.com/coreos/go-systemd/v22/unit"
	"github.com/godbus/dbus/v5"
	"github.com/mosaic-agents/mosaic/internal/procfs"
	"github.com/mosaic-agents/mosaic/proofs"
)

// Launch errors. Each is wrapped with the unit name and the cause.
var (
	// ErrUnitExists: a unit with the scope's name exists and stayed after
	// one reset-failed and retry (another live execution has the name).
	ErrUnitExists = errors.New("scope unit already exists")
	// ErrJobFailed: the start job ended with a result other than "done".
	ErrJobFailed = errors.New("scope start job did not end done")
	// ErrJobTimeout: the start job gave no result within Config.JobTimeout.
	ErrJobTimeout = errors.New("scope start job timed out")
	// ErrNotInScope: after the job, /proc/<pid>/cgroup did not name the
	// scope's engine cgroup, so the engine was never released.
	ErrNotInScope = errors.New("held child is not in the scope's engine cgroup")
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
	// Stderr receives the engine's stderr; nil means a pipe whose read end
	// is Handle.Stderr (the caller must drain it).
	Stderr    *os.File
	Resources Resources
	// BeforeRelease, if set, is called once the cohort is confirmed and
	// before the engine may exec: the controller records the incarnation
	// (the claim's `active` revision) here. An error aborts the launch and
	// the engine never runs.
	BeforeRelease func(Cohort) error
}

// Cohort says what contains an engine and its descendants. It is plain
// data, meant to be stored in the writer claim so a restarted controller can
// Reattach and resume a stop.
type Cohort struct {
	// Kind is proofs.KindScope, or proofs.KindProcessGroup for the
	// fallback, whose stops can never reach stopped.
	Kind proofs.Kind `json:"kind"`
	// Reason explains a process-group fallback (why, and what it means).
	Reason       string `json:"reason,omitempty"`
	Conversation string `json:"conversation"`
	Execution    string `json:"execution"`
	Unit         string `json:"unit,omitempty"`
	InvocationID string `json:"invocation_id,omitempty"`
	ScopeCgroup  string `json:"scope_cgroup,omitempty"` // the unit's ControlGroup
	Cgroup       string `json:"cgroup,omitempty"`       // ScopeCgroup/engine: the cohort
	BootID       string `json:"boot_id"`
	PID          int    `json:"pid"`        // the engine; its process group in the fallback
	StartTime    uint64 `json:"start_time"` // the engine's, clock ticks since boot
	AnchorPID    int    `json:"anchor_pid,omitempty"`
	AnchorStart  uint64 `json:"anchor_start,omitempty"`
	// Confinement is the evidence of the engine's confinement, read before
	// it ran (see proofs.Confinement); Confined false says why not. A
	// cohort recorded without it counts as unconfined.
	Confinement proofs.Confinement `json:"confinement"`

	// CgroupID is the kernel id of Cgroup (its directory's inode), so a
	// stop can tell our cgroup from a later one at the same path.
	CgroupID uint64 `json:"cgroup_id,omitempty"`
}

// Manager launches and stops engines. Make one per process: it holds the
// one lazily dialled user-bus connection and the cgroup2 mount handle.
type Manager struct {
	cfg Config
	bus bus

	mu sync.Mutex
	cg *cgroupFS

	probeMu sync.Mutex
	probed  bool // a probe showed engines can be confined here

	extraProps []sddbus.Property // tests only: e.g. a dependency that fails or hangs the job
}

// NewManager returns a Manager; nothing is dialled or opened until used.
func NewManager(cfg Config) *Manager {
	if cfg.Slice == "" {
		cfg.Slice = "app-mosaic.slice"
	}
	if cfg.JobTimeout <= 0 {
		cfg.JobTimeout = 10 * time.Second
	}
	return &Manager{cfg: cfg, bus: newBus(cfg.BusAddress)}
}

// Close drops the bus connection and the cgroup2 handle.
func (m *Manager) Close() {
	m.bus.close()
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
	if conversation == "" || execution == "" {
		return "", errors.New("scope name: conversation and execution must not be empty")
	}
	n := "mosaic-engine-" + unit.UnitNameEscape(conversation) + "-" + unit.UnitNameEscape(execution) + ".scope"
	if len(n) > 255 {
		return "", fmt.Errorf("scope name %q is longer than 255 bytes", n)
	}
	return n, nil
}

// Handle is a launched engine.
type Handle struct {
	// Stdin is the engine's stdin. Keep it open for the engine's whole life
	// (Pi exits at EOF); closing it is not a stop.
	Stdin  *os.File
	Stdout *os.File
	Stderr *os.File // nil if Spec.Stderr was given
	Cohort Cohort

	m       *Manager
	engine  *exec.Cmd // nil after Reattach
	anchor  *exec.Cmd
	done    chan struct{}
	exitErr error
	// reapedAt and anchorReapedAt are the CLOCK_BOOTTIME times at which
	// this process reaped the engine and the anchor; valid once done and
	// anchorDone are closed. anchorDone is nil after Reattach.
	reapedAt       uint64
	anchorDone     chan struct{}
	anchorReapedAt uint64

	mu   sync.Mutex
	term []*member // TERM-phase members, pinned by pidfd, for the kill phase
	// leader pins the process-group fallback's engine: while its pidfd is
	// open the pid number, and so the pgid, cannot be reused, so signalling
	// the group can only reach the engine's group.
	leader *member
}

// Done is closed when the engine process has exited and been reaped. An
// exit proves nothing about the cohort: its children may live on. For a
// Reattach handle it is closed from the start (ExitErr says why).
func (h *Handle) Done() <-chan struct{} { return h.done }

// ExitErr is the engine's exit status (as exec.Cmd.Wait) once Done is closed.
func (h *Handle) ExitErr() error {
	select {
	case <-h.done:
		return h.exitErr
	default:
		return nil
	}
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
	env := spec.Env
	if env == nil {
		env = os.Environ()
	}
	rel := release{Path: exe, Argv: spec.Argv, Env: env}
	if _, err := m.bus.get(ctx); err != nil {
		if !errors.Is(err, ErrNoUserManager) || !m.cfg.Fallback {
			return nil, err
		}
		return m.launchGroup(spec, rel, err)
	}
	return m.launchScope(ctx, spec, name, rel)
}

// stdio makes the engine's pipes; the child ends are closed by closeChild.
type stdio struct {
	inR, inW, outR, outW, errR, errW *os.File
}

func newStdio(stderr *os.File) (*stdio, error) {
	s := &stdio{}
	var err error
	if s.inR, s.inW, err = os.Pipe(); err != nil {
		return nil, err
	}
	if s.outR, s.outW, err = os.Pipe(); err != nil {
		s.closeAll()
		return nil, err
	}
	if stderr != nil {
		s.errW = stderr
	} else if s.errR, s.errW, err = os.Pipe(); err != nil {
		s.closeAll()
		return nil, err
	}
	return s, nil
}

func (s *stdio) closeChild() {
	s.inR.Close()
	s.outW.Close()
	if s.errR != nil {
		s.errW.Close()
	}
}

func (s *stdio) closeAll() {
	for _, f := range []*os.File{s.inR, s.inW, s.outR, s.outW, s.errR} {
		if f != nil {
			f.Close()
		}
	}
	if s.errR != nil && s.errW != nil {
		s.errW.Close()
	}
}

func (m *Manager) properties(spec Spec, pids ...uint32) []sddbus.Property {
	desc := spec.Description
	if desc == "" {
		desc = fmt.Sprintf("mosaic engine, conversation %s, execution %s", spec.Conversation, spec.Execution)
	}
	props := []sddbus.Property{
		sddbus.PropDescription(desc),
		sddbus.PropSlice(m.cfg.Slice),
		sddbus.PropPids(pids...),
		// The engine and anchor live in sub-cgroups we create; systemd
		// must leave the subtree to us.
		{Name: "Delegate", Value: dbus.MakeVariant(true)},
		{Name: "CollectMode", Value: dbus.MakeVariant("inactive-or-failed")},
		// The anchor ignores SIGTERM: an outside `systemctl --user stop`
		// reaches SIGKILL after this long instead of the default 90 s.
		{Name: "TimeoutStopUSec", Value: dbus.MakeVariant(uint64(10 * time.Second / time.Microsecond))},
	}
	props = append(props, m.extraProps...)
	r := spec.Resources
	if r.MemoryMax > 0 {
		props = append(props, sddbus.Property{Name: "MemoryMax", Value: dbus.MakeVariant(r.MemoryMax)})
	}
	if r.TasksMax > 0 {
		props = append(props, sddbus.Property{Name: "TasksMax", Value: dbus.MakeVariant(r.TasksMax)})
	}
	if r.MemoryMaxScale > 0 {
		props = append(props, sddbus.Property{Name: "MemoryMaxScale", Value: dbus.MakeVariant(r.MemoryMaxScale)})
	}
	if r.TasksMaxScale > 0 {
		props = append(props, sddbus.Property{Name: "TasksMaxScale", Value: dbus.MakeVariant(r.TasksMaxScale)})
	}
	switch {
	case r.CPUQuotaPerSecUSec > 0:
		props = append(props, sddbus.Property{Name: "CPUQuotaPerSecUSec", Value: dbus.MakeVariant(r.CPUQuotaPerSecUSec)})
	case r.CPUQuota > 0:
		usec := uint64(r.CPUQuota * 10000) // 100% = 1 s of CPU per second
		props = append(props, sddbus.Property{Name: "CPUQuotaPerSecUSec", Value: dbus.MakeVariant(usec)})
	}
	return props
}

// startUnit creates the transient scope and waits for its job on a
// buffered channel (an unread unbuffered one would hang every later job on
// the connection, go-systemd #429). On UnitExists it resets the failed unit
// and retries once, as runc does.
func (m *Manager) startUnit(ctx context.Context, name string, props []sddbus.Property, heldPID int) error {
	for attempt := 0; ; attempt++ {
		ch := make(chan string, 1)
		err := m.bus.do(ctx, func(c *sddbus.Conn) error {
			_, err := c.StartTransientUnitContext(ctx, name, "fail", props, ch)
			return err
		})
		if isUnitExists(err) {
			// After a reconnect the unit may be ours from the first try.
			if cg, cerr := procfs.Cgroup2(heldPID); cerr == nil && path.Base(cg) == name {
				return nil
			}
			if attempt == 0 {
				_ = m.bus.resetFailed(ctx, name)
				continue
			}
			return fmt.Errorf("%w: %s: %w", ErrUnitExists, name, err)
		}
		if err != nil {
			return fmt.Errorf("start scope %s: %w", name, err)
		}
		t := time.NewTimer(m.cfg.JobTimeout)
		defer t.Stop()
		select {
		case r := <-ch:
			if r != "done" {
				return fmt.Errorf("%w: %s: job result %q", ErrJobFailed, name, r)
			}
			return nil
		case <-t.C:
			return fmt.Errorf("%w: %s: no job result after %v", ErrJobTimeout, name, m.cfg.JobTimeout)
		case <-ctx.Done():
			return fmt.Errorf("start scope %s: %w", name, ctx.Err())
		}
	}
}

func (m *Manager) launchScope(ctx context.Context, spec Spec, name string, rel release) (h *Handle, err error) {
	fs, err := m.cgroupFS()
	if err != nil {
		return nil, err
	}
	io, err := newStdio(spec.Stderr)
	if err != nil {
		return nil, err
	}
	confined, why := m.confinementAvailable(ctx)
	var plan *confinePlan
	if confined {
		p, err := planConfinement()
		if err != nil {
			io.closeAll()
			return nil, err
		}
		plan = &p
	}
	rel.Confine = plan
	anchor, anchorReady, err := startAnchor()
	if err != nil {
		io.closeAll()
		return nil, err
	}
	defer anchorReady.Close()
	held, err := startHeld(spec.Dir, io.inR, io.outW, io.errW, confined)
	if err != nil {
		anchor.Process.Kill()
		anchor.Wait()
		io.closeAll()
		return nil, err
	}
	io.closeChild()
	unitCreated := false
	defer func() {
		if err == nil {
			return
		}
		held.abort()
		anchor.Process.Kill()
		anchor.Wait()
		io.closeAll()
		if unitCreated {
			// Leave nothing behind: the scope empties with the two
			// children gone; a failed unit is reset.
			_ = m.bus.resetFailed(context.WithoutCancel(ctx), name)
		}
	}()
	apid, hpid := anchor.Process.Pid, held.cmd.Process.Pid
	if err = m.startUnit(ctx, name, m.properties(spec, uint32(apid), uint32(hpid)), hpid); err != nil {
		unitCreated = errors.Is(err, ErrJobTimeout) || errors.Is(err, ErrJobFailed)
		return nil, err
	}
	unitCreated = true
	// Both children must really be parked in their roles (MaybeRunHeld
	// wired into main); the anchor had the whole scope job to get there.
	readyBy := time.Now().Add(m.cfg.JobTimeout)
	if err = awaitReady(anchorReady, roleAnchor, readyBy); err != nil {
		return nil, fmt.Errorf("anchor: %w", err)
	}
	if err = awaitReady(held.ready, roleHeld, readyBy); err != nil {
		return nil, fmt.Errorf("held child: %w", err)
	}
	scopeCg, err := m.bus.controlGroup(ctx, name)
	if err != nil {
		return nil, fmt.Errorf("scope %s: read ControlGroup: %w", name, err)
	}
	if scopeCg == "" || path.Base(scopeCg) != name {
		return nil, fmt.Errorf("%w: scope %s has ControlGroup %q", ErrNotInScope, name, scopeCg)
	}
	st, err := m.bus.unitState(ctx, name)
	if err != nil {
		return nil, fmt.Errorf("scope %s: read InvocationID: %w", name, err)
	}
	// systemd put both children in the scope's cgroup; confirm, then move
	// each into its sub-cgroup and confirm again.
	for _, pid := range []int{apid, hpid} {
		if cg, cerr := procfs.Cgroup2(pid); cerr != nil || cg != scopeCg {
			return nil, fmt.Errorf("%w: pid %d in %q (%v), want %s", ErrNotInScope, pid, cg, cerr, scopeCg)
		}
	}
	engineCg := path.Join(scopeCg, EngineSubgroup)
	anchorCg := path.Join(scopeCg, AnchorSubgroup)
	for _, sub := range []struct {
		cg  string
		pid int
	}{{anchorCg, apid}, {engineCg, hpid}} {
		if err = fs.mkdir(scopeCg, path.Base(sub.cg)); err != nil {
			return nil, fmt.Errorf("scope %s: %w", name, err)
		}
		if err = fs.write(sub.cg, "cgroup.procs", fmt.Sprint(sub.pid)); err != nil {
			return nil, fmt.Errorf("scope %s: move pid %d: %w", name, sub.pid, err)
		}
		if cg, cerr := procfs.Cgroup2(sub.pid); cerr != nil || cg != sub.cg {
			return nil, fmt.Errorf("%w: pid %d in %q (%v), want %s", ErrNotInScope, sub.pid, cg, cerr, sub.cg)
		}
	}
	cgID, err := fs.id(engineCg)
	if err != nil {
		return nil, fmt.Errorf("scope %s: %w", name, err)
	}
	hst, err := procfs.ReadStat(hpid)
	if err != nil {
		return nil, fmt.Errorf("held child %d: %w", hpid, err)
	}
	ast, err := procfs.ReadStat(apid)
	if err != nil {
		return nil, fmt.Errorf("anchor %d: %w", apid, err)
	}
	boot, err := procfs.BootID()
	if err != nil {
		return nil, err
	}
	// The held child sets up the confinement now that it is in the engine
	// cgroup (its cgroup namespace is rooted there); the evidence is read
	// from the kernel before the cohort is recorded and the engine runs.
	conf := proofs.Confinement{Reason: why}
	if err = held.sendRelease(rel); err != nil {
		return nil, fmt.Errorf("release held child %d: %w", hpid, err)
	}
	rep, err := held.awaitReport(time.Now().Add(m.cfg.JobTimeout))
	if err == nil && confined {
		conf, err = evidence(hpid, rep, engineCg)
	}
	if err != nil {
		return nil, fmt.Errorf("launch %s: %w: %w", name, ErrConfinement, err)
	}
	h = &Handle{
		Stdin:  io.inW,
		Stdout: io.outR,
		Stderr: io.errR,
		Cohort: Cohort{
			Kind:         proofs.KindScope,
			Conversation: spec.Conversation,
			Execution:    spec.Execution,
			Unit:         name,
			InvocationID: st.InvocationID,
			ScopeCgroup:  scopeCg,
			Cgroup:       engineCg,
			CgroupID:     cgID,
			BootID:       boot,
			PID:          hpid,
			StartTime:    hst.StartTime,
			AnchorPID:    apid,
			AnchorStart:  ast.StartTime,
			Confinement:  conf,
		},
		m:          m,
		engine:     held.cmd,
		anchor:     anchor,
		done:       make(chan struct{}),
		anchorDone: make(chan struct{}),
	}
	if spec.BeforeRelease != nil {
		if err = spec.BeforeRelease(h.Cohort); err != nil {
			return nil, fmt.Errorf("launch %s: before release: %w", name, err)
		}
	}
	if err = held.releaseEngine(); err != nil {
		return nil, fmt.Errorf("release held child %d: %w", hpid, err)
	}
	go h.reap()
	go h.reapAnchor()
	return h, nil
}

// PGroupReason is the text every process-group cohort carries.
const PGroupReason = "process-group fallback (no systemd user manager): a child that calls setsid leaves the group, " +
	"so membership can never be shown complete and a stop can end uncertain, never stopped"

func (m *Manager) launchGroup(spec Spec, rel release, cause error) (*Handle, error) {
	io, err := newStdio(spec.Stderr)
	if err != nil {
		return nil, err
	}
	held, err := startHeld(spec.Dir, io.inR, io.outW, io.errW, false)
	if err != nil {
		io.closeAll()
		return nil, err
	}
	io.closeChild()
	pid := held.cmd.Process.Pid
	if err := awaitReady(held.ready, roleHeld, time.Now().Add(m.cfg.JobTimeout)); err != nil {
		held.abort()
		io.closeAll()
		return nil, fmt.Errorf("held child: %w", err)
	}
	// Our unreaped child: the pid cannot be reused before the pidfd pins it.
	leader, err := openMember(pid, 0, "")
	boot, berr := procfs.BootID()
	if err == nil {
		err = berr
	}
	cohort := Cohort{
		Kind:         proofs.KindProcessGroup,
		Reason:       PGroupReason + ": " + firstLine(cause.Error()),
		Conversation: spec.Conversation,
		Execution:    spec.Execution,
		BootID:       boot,
		PID:          pid,
		Confinement:  proofs.Confinement{Reason: "process-group fallback: no cgroup to root a cgroup namespace at"},
	}
	if err == nil {
		err = held.sendRelease(rel)
	}
	if err == nil {
		_, err = held.awaitReport(time.Now().Add(m.cfg.JobTimeout))
	}
	if err == nil {
		cohort.StartTime = leader.StartTime
		if spec.BeforeRelease != nil {
			err = spec.BeforeRelease(cohort)
		}
	}
	if err == nil {
		err = held.releaseEngine()
	}
	if err != nil {
		if leader != nil {
			leader.close()
		}
		held.abort()
		io.closeAll()
		return nil, fmt.Errorf("launch in process group: %w", err)
	}
	h := &Handle{
		Stdin:  io.inW,
		Stdout: io.outR,
		Stderr: io.errR,
		Cohort: cohort,
		m:      m,
		engine: held.cmd,
		done:   make(chan struct{}),
		leader: leader,
	}
	go h.reap()
	return h, nil
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	return s
}

func (h *Handle) reap() {
	h.exitErr = h.engine.Wait()
	h.reapedAt = procfs.BoottimeNanos()
	close(h.done)
}

func (h *Handle) reapAnchor() {
	h.anchor.Wait()
	h.anchorReapedAt = procfs.BoottimeNanos()
	close(h.anchorDone)
}

// Reattach returns a handle on a cohort recorded by an earlier controller
// (K10: a restart resumes a stop). It has no stdio and reaps nothing; Term,
// Kill and Stop re-check everything from systemd and the kernel. A record
// that kept only the claim's incarnation (boot id, pid, start time,
// cgroup) works too: see CohortOf.
func (m *Manager) Reattach(c Cohort) *Handle {
	done := make(chan struct{})
	close(done)
	return &Handle{Cohort: c, m: m, done: done, exitErr: errReattached}
}

// CohortOf rebuilds a scope Cohort from what a writer claim records about
// an incarnation: conversation, execution, boot id, engine pid, start time
// and engine cgroup. The InvocationID is then unknown; the kill phase takes
// the unit's current one (an execution id names one launch only) and notes
// it.
func CohortOf(conversation, execution, bootID string, pid int, startTime uint64, cgroup string) (Cohort, error) {
	name, err := UnitName(conversation, execution)
	if err != nil {
		return Cohort{}, err
	}
	if cgroup == "" {
		return Cohort{Kind: proofs.KindProcessGroup, Reason: PGroupReason, Conversation: conversation,
			Execution: execution, BootID: bootID, PID: pid, StartTime: startTime}, nil
	}
	scope := path.Dir(cgroup)
	if path.Base(cgroup) != EngineSubgroup || path.Base(scope) != name {
		return Cohort{}, fmt.Errorf("cgroup %q is not the engine cgroup of %s", cgroup, name)
	}
	return Cohort{Kind: proofs.KindScope, Conversation: conversation, Execution: execution, Unit: name,
		ScopeCgroup: scope, Cgroup: cgroup, BootID: bootID, PID: pid, StartTime: startTime,
		Confinement: proofs.Confinement{Reason: "not recorded: the cohort was rebuilt from the claim alone"}}, nil
}

var errReattached = errors.New("reattached handle: this process is not the engine's parent, its exit is unknown")
