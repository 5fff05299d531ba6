package controller

import (
	"fmt"
	"math"

	"github.com/mosaic-agents/mosaic/conversations"
	"github.com/mosaic-agents/mosaic/engine/pi"
	"github.com/mosaic-agents/mosaic/protocol"
	"github.com/mosaic-agents/mosaic/scopes"
)

// settings returns the conversation as configured now: `conv add
// --replace` takes effect at the next launch (the first one, or launch
// after recover) without a controller restart. The identity of the
// conversation (id, project, seat, session, workspace) keys its claim and
// cannot change under a running controller; a change there is refused
// with the restart that applies it.
func (c *Controller) settings() (*conversations.Conversation, error) {
	if c.cfg.Load == nil {
		return c.cfg.Conversation, nil
	}
	cv, err := c.cfg.Load()
	if err != nil {
		return nil, fmt.Errorf("re-read the settings of conversation %s: %w", c.cfg.Conversation.ID, err)
	}
	was := c.cfg.Conversation
	if cv.ID != was.ID || cv.Project != was.Project || cv.Seat != was.Seat || cv.Session != was.Session || cv.Workspace != was.Workspace {
		return nil, protocol.Refuse(protocol.CodeConfiguration,
			"conversation %s: its workspace changed from %q to %q since this controller started; it applies after a restart of the controller: stop the engine, then systemctl --user restart mosaic-conv@%s.service",
			was.ID, was.Workspace, cv.Workspace, was.ID)
	}
	return cv, nil
}

// resourcesOf maps typed limits onto the scope's D-Bus properties, as
// systemd-run does for the same strings: bytes or a count as the property
// itself, infinity as UINT64_MAX (CGROUP_LIMIT_MAX), a percentage as the
// *Scale property (UINT32_MAX = 100%) so systemd resolves it against
// physical memory or its task limit, and CPUQuota= as CPUQuotaPerSecUSec.
func resourcesOf(l conversations.Limits) scopes.Resources {
	var r scopes.Resources
	switch m := l.MemoryMax; {
	case m.Unlimited:
		r.MemoryMax = math.MaxUint64
	case m.Share > 0:
		r.MemoryMaxScale = m.Share.Scale()
	default:
		r.MemoryMax = m.Bytes
	}
	switch t := l.TasksMax; {
	case t.Unlimited:
		r.TasksMax = math.MaxUint64
	case t.Share > 0:
		r.TasksMaxScale = t.Share.Scale()
	default:
		r.TasksMax = t.Count
	}
	r.CPUQuotaPerSecUSec = l.CPUQuota.PerSecUSec()
	return r
}

// limitsText is the audit's one-line account of the limits a launch
// applied ("MemoryMax=4G TasksMax=512 CPUQuota=200%", or "none").
func limitsText(l conversations.Limits) string {
	s := ""
	add := func(k, v string) {
		if v != "" {
			if s != "" {
				s += " "
			}
			s += k + "=" + v
		}
	}
	add("MemoryMax", l.MemoryMax.String())
	add("TasksMax", l.TasksMax.String())
	add("CPUQuota", l.CPUQuota.String())
	if s == "" {
		return "none"
	}
	return s
}

// pinOf is the engine pin recorded in the conversation file.
func pinOf(e conversations.Engine) pi.Pin {
	return e.Pin()
}
