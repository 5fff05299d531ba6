package proofs

import (
	"fmt"
	"path"
	"slices"
	"strings"
)

// Namespace types an engine must have of its own to count as confined.
// The network namespace is shared on purpose (the engine calls its model),
// so it is not among them.
var ConfinedNamespaces = []string{"user", "mnt", "pid", "cgroup"}

// The Landlock scopes an engine's domain may have (Confinement.Scoped).
const (
	// ScopeAbstractUnix: no connection to an abstract Unix socket bound
	// outside the engine's domain.
	ScopeAbstractUnix = "abstract-unix-socket"
	// ScopeSignal: no signal to a process outside the engine's domain.
	ScopeSignal = "signal"
)

// Scopes are the scope names a Confinement may list, in order.
var Scopes = []string{ScopeAbstractUnix, ScopeSignal}

// Confinement is the evidence that an engine and every process it starts
// could neither leave the cohort's cgroup nor ask anyone outside to start a
// process for them: the engine ran in namespaces of its own (user, mount,
// pid, cgroup) whose identities differ from the controller's, with the
// user manager's, D-Bus's and mosaic's sockets masked and a cgroup view
// rooted at the cohort's cgroup. Without it a cohort's cgroup being empty
// says nothing about the processes the agent had started elsewhere.
type Confinement struct {
	// Confined is false when the engine ran without confinement; Reason
	// then says why (mechanism unavailable, opted out, not recorded).
	Confined bool   `json:"confined"`
	Reason   string `json:"reason,omitempty"`
	// Namespaces are the inode numbers of the engine's namespaces, read
	// from /proc/<pid>/ns/* by the controller before the engine ran, and
	// the controller's own.
	Namespaces []Namespace `json:"namespaces"`
	// Masked are the paths made unreachable inside (an empty read-only
	// tmpfs over a directory, /dev/null over a socket) or replaced by the
	// engine's own (/dev, /dev/pts, /dev/shm, /dev/mqueue).
	// Which paths exist to be masked depends on the machine (its runtime
	// directory, its buses, whether another mount shows /dev), so Holds
	// requires some, each absolute and clean, not a given list. Keeping
	// the FUSE device out of /dev serves the stop, not the proof: a reader
	// that FUSE kept alive would keep the cgroup populated, and no proof
	// is made of that.
	Masked []string `json:"masked"`
	// ReadOnly are the paths the engine could read but not change: the
	// inputs the controller gives other conversations' engines (Pi's
	// agent directories, a Claude env file), and the files sealed in a
	// directory the engine reaches only through its descriptor (a Pi
	// engine's own auth.json, masked at this path).
	ReadOnly []string `json:"read_only,omitempty"`
	// Devices are the host devices the engine's own /dev held besides the
	// plain ones, which every tool could open (`conv add --device`).
	Devices []string `json:"devices,omitempty"`
	// CgroupRoot is the cgroup the engine's cgroup namespace is rooted at,
	// which is also the only part of the cgroup2 hierarchy mounted inside.
	CgroupRoot string `json:"cgroup_root"`
	// Scoped are the Landlock scopes of the domain the engine was forked
	// into, as the held child set them. The network namespace is shared,
	// so they alone keep abstract Unix sockets outside out of reach. A
	// kernel may have none (Landlock off, or before Linux 6.12), so Holds
	// does not require them; Unscoped then says why.
	Scoped   []string `json:"scoped,omitempty"`
	Unscoped string   `json:"unscoped,omitempty"`
	// ToolShell is where the engine's view held the tool shell, which
	// runs each tool in a Landlock domain nested in the engine's, so that
	// no tool can attach to its engine; Unnested says why there was none.
	// The engine decides whether it runs its tools with it (Pi does where
	// the controller names it, through shellPath), so Holds requires
	// neither.
	ToolShell string `json:"tool_shell,omitempty"`
	Unnested  string `json:"unnested,omitempty"`
}

// Namespace is one namespace identity: the engine's and the controller's
// inode numbers of the same type.
type Namespace struct {
	Type       string `json:"type"`
	Engine     uint64 `json:"engine"`
	Controller uint64 `json:"controller"`
}

// Holds reports whether c is complete evidence of confinement for a cohort
// whose cgroup is cgroup, and if not, why.
func (c *Confinement) Holds(cgroup string) (bool, string) {
	if c == nil {
		return false, "no confinement evidence recorded"
	}
	if !c.Confined {
		r := c.Reason
		if r == "" {
			r = "not recorded"
		}
		return false, "engine ran unconfined: " + r
	}
	var why []string
	if c.Reason != "" {
		why = append(why, fmt.Sprintf("confined yet with reason %q", c.Reason))
	}
	why = append(why, listedOnce(c.Namespaces)...)
	for _, typ := range ConfinedNamespaces {
		i := slices.IndexFunc(c.Namespaces, func(n Namespace) bool { return n.Type == typ })
		switch {
		case i < 0:
			why = append(why, typ+" namespace missing")
		case c.Namespaces[i].Engine == 0 || c.Namespaces[i].Controller == 0:
			why = append(why, typ+" namespace identity unread")
		case c.Namespaces[i].Engine == c.Namespaces[i].Controller:
			why = append(why, fmt.Sprintf("%s namespace %d is the controller's", typ, c.Namespaces[i].Engine))
		}
	}
	if len(c.Masked) == 0 {
		why = append(why, "nothing masked")
	}
	for _, m := range c.Masked {
		if !strings.HasPrefix(m, "/") || path.Clean(m) != m {
			why = append(why, fmt.Sprintf("masked path %q is not absolute and clean", m))
		}
	}
	for _, r := range c.ReadOnly {
		if !strings.HasPrefix(r, "/") || path.Clean(r) != r {
			why = append(why, fmt.Sprintf("read-only path %q is not absolute and clean", r))
		}
	}
	why = append(why, knownScopes(c.Scoped)...)
	if len(c.Scoped) > 0 && c.Unscoped != "" {
		why = append(why, fmt.Sprintf("scoped %v yet unscoped %q", c.Scoped, c.Unscoped))
	}
	if c.CgroupRoot != cgroup {
		why = append(why, fmt.Sprintf("cgroup namespace rooted at %q, not the cohort's %q", c.CgroupRoot, cgroup))
	}
	if len(why) > 0 {
		return false, strings.Join(why, "; ")
	}
	return true, ""
}

// listedOnce says what is wrong with a list of namespaces other than a
// missing one: each type of ConfinedNamespaces must be listed exactly once
// and no other. A second entry of a type would let a proof show one
// identity and hold another (the controller's own) beside it.
func listedOnce(ns []Namespace) []string {
	var why []string
	count := map[string]int{}
	for _, n := range ns {
		count[n.Type]++
		if !slices.Contains(ConfinedNamespaces, n.Type) {
			why = append(why, fmt.Sprintf("namespace type %q is not one of %v", n.Type, ConfinedNamespaces))
		}
	}
	for _, typ := range ConfinedNamespaces {
		if count[typ] > 1 {
			why = append(why, fmt.Sprintf("%s namespace listed %d times", typ, count[typ]))
		}
	}
	return why
}

// knownScopes says what is wrong with a list of scopes: each must be one
// of Scopes, listed once.
func knownScopes(scoped []string) []string {
	var why []string
	for i, s := range scoped {
		switch {
		case !slices.Contains(Scopes, s):
			why = append(why, fmt.Sprintf("scope %q is not one of %v", s, Scopes))
		case slices.Index(scoped, s) != i:
			why = append(why, fmt.Sprintf("scope %s listed twice", s))
		}
	}
	return why
}

// ScopeNote is what a proof (and doctor) says about the engine's scopes.
func (c *Confinement) ScopeNote() string {
	if len(c.Scoped) == 0 {
		why := c.Unscoped
		if why == "" {
			why = "not recorded"
		}
		return "abstract sockets and signals outside reachable (" + why + ")"
	}
	return "scoped " + strings.Join(c.Scoped, " ")
}

// checkConfinement adds the confinement check of a cohort proof. A version
// 1 proof predates confinement and never passes it.
func checkConfinement(cs *checks, p *CohortProof) {
	if p.Version < CohortVersion {
		cs.add("confinement", false, ErrUnconfined,
			"version %d proof predates engine confinement: nothing shows the agent's processes stayed in the cohort", p.Version)
		return
	}
	ok, why := p.Confinement.Holds(p.Cgroup)
	if ok {
		var ns []string
		for _, n := range p.Confinement.Namespaces {
			ns = append(ns, fmt.Sprintf("%s %d", n.Type, n.Engine))
		}
		ro := ""
		if len(p.Confinement.ReadOnly) > 0 {
			ro = ", read-only " + strings.Join(p.Confinement.ReadOnly, " ")
		}
		why = fmt.Sprintf("engine in its own namespaces (%s), cgroup view %s, masked %s%s, %s",
			strings.Join(ns, ", "), p.Confinement.CgroupRoot, strings.Join(p.Confinement.Masked, " "), ro, p.Confinement.ScopeNote())
	}
	cs.add("confinement", ok, ErrUnconfined, "%s", why)
}
