package web

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"sync"
	"time"

	sd "github.com/coreos/go-systemd/v22/dbus"
	"github.com/mosaic-agents/mosaic/client"
	"github.com/mosaic-agents/mosaic/conversations"
	"github.com/mosaic-agents/mosaic/internal/userbus"
	"github.com/mosaic-agents/mosaic/terminal"
	"github.com/mosaic-agents/mosaic/units"
)

// listEvery is how often the list rereads the registry and unit states.
// Bindings of running controllers arrive live in between.
const listEvery = 2 * time.Second

// row is one conversation of the list: what `mosaicctl status` shows.
type row struct {
	ID                  string `json:"id"`
	Project             string `json:"project"`
	Seat                string `json:"seat"`
	Socket              string `json:"socket"`
	Service             string `json:"service"`
	State               string `json:"state"`
	EngineState         string `json:"engineState"`
	Admission           string `json:"admission"`
	Generation          *int64 `json:"generation"`
	Controller          bool   `json:"controller"`
	ControllerConnected bool   `json:"controllerConnected"`
	LastStop            string `json:"lastStop"`
	EngineEnd           string `json:"engineEnd"`
	// Queue counts the waiting prompts of a running controller's queue
	// (its latest queue record) and QueuePaused says it holds them; nil
	// when no controller runs or none reported a queue yet. Approvals counts the decisions the controller
	// may answer now (the binding's pendingApprovals): more than none is
	// the waiting-for-approval state; nil when no controller runs.
	Queue       *int   `json:"queue"`
	QueuePaused bool   `json:"queuePaused"`
	Approvals   *int   `json:"approvals"`
	Error       string `json:"error"`
}

// lister keeps the rows while a list page is open. Like `mosaicctl
// status`, it never starts a controller to ask it: a binding comes from a
// controller whose service is already active, over one observer
// connection per conversation that stays open while the list is watched.
type lister struct {
	s       *Server
	mu      sync.Mutex
	watch   map[string]*client.Client
	viewers int
	changed chan struct{}
}

func newLister(s *Server) *lister {
	return &lister{s: s, watch: map[string]*client.Client{}, changed: make(chan struct{}, 1)}
}

func (l *lister) signal() {
	select {
	case l.changed <- struct{}{}:
	default:
	}
}

func (l *lister) attach() {
	l.mu.Lock()
	l.viewers++
	l.mu.Unlock()
}

func (l *lister) detach() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.viewers--; l.viewers == 0 {
		for id, c := range l.watch {
			c.Close()
			delete(l.watch, id)
		}
	}
}

func (s *Server) conversationList() ([]*conversations.Conversation, error) {
	if s.opts.Conversations != nil {
		return s.opts.Conversations()
	}
	st, err := conversations.Open()
	if err != nil {
		return nil, err
	}
	list, _, err := st.List()
	return list, err
}

func (s *Server) conversation(id string) (*conversations.Conversation, error) {
	st, err := conversations.Open()
	if err != nil {
		return nil, err
	}
	return st.Load(id)
}

// rows reads the registry, the unit states and the watched bindings.
func (l *lister) rows(ctx context.Context) ([]row, error) {
	convs, err := l.s.conversationList()
	if err != nil {
		return nil, err
	}
	states := map[string]sd.UnitStatus{}
	var names []string
	for _, c := range convs {
		names = append(names, units.SocketUnit(c.ID), units.ServiceUnit(c.ID))
	}
	if len(names) > 0 {
		err := userbus.Default().Do(ctx, func(conn *sd.Conn) error {
			us, err := conn.ListUnitsByNamesContext(ctx, names)
			for _, u := range us {
				states[u.Name] = u
			}
			return err
		})
		if err != nil {
			return nil, err
		}
	}
	out := make([]row, 0, len(convs))
	for _, c := range convs {
		r := row{ID: c.ID, Project: terminal.SanitizeLine(c.Project), Seat: terminal.SanitizeLine(c.Seat),
			Socket: activeOf(states, units.SocketUnit(c.ID)), Service: activeOf(states, units.ServiceUnit(c.ID))}
		if r.Service == "active" {
			l.binding(ctx, &r)
		} else {
			l.unwatch(c.ID)
		}
		out = append(out, r)
	}
	return out, nil
}

func activeOf(states map[string]sd.UnitStatus, name string) string {
	if u, ok := states[name]; ok {
		return u.ActiveState
	}
	return "inactive"
}

func (l *lister) unwatch(id string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if c := l.watch[id]; c != nil {
		c.Close()
		delete(l.watch, id)
	}
}

// binding fills r from the watched connection of an active controller,
// dialling it on first sight.
func (l *lister) binding(ctx context.Context, r *row) {
	l.mu.Lock()
	c := l.watch[r.ID]
	l.mu.Unlock()
	if c != nil {
		select {
		case <-c.Done():
			l.unwatch(r.ID)
			c = nil
		default:
		}
	}
	if c == nil {
		path, err := units.SocketPath(r.ID)
		if err != nil {
			r.Error = terminal.SanitizeLine(err.Error())
			return
		}
		dctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		c, err = client.Dial(dctx, path, client.Options{Name: "mosaic-web list", QueueEvents: 64})
		if err != nil {
			r.Error = terminal.SanitizeLine(err.Error())
			return
		}
		if _, err := c.WaitBound(dctx); err != nil {
			c.Close()
			r.Error = terminal.SanitizeLine(err.Error())
			return
		}
		l.mu.Lock()
		if old := l.watch[r.ID]; old != nil || l.viewers == 0 {
			// Another list stream dialled it meanwhile, or every
			// viewer left: keep one connection, or none.
			l.mu.Unlock()
			c.Close()
			if old == nil {
				return
			}
			c = old
		} else {
			l.watch[r.ID] = c
			l.mu.Unlock()
			go func() {
				for range c.Updates() {
					l.signal()
				}
			}()
		}
	}
	st := c.State()
	if b := st.Binding; b != nil {
		g := b.Generation
		r.State, r.EngineState, r.Admission, r.Generation = b.State, b.EngineState, b.Admission, &g
		r.Controller, r.ControllerConnected, r.LastStop = b.Controller != "", b.ControllerConnected, b.LastStop
		n := b.PendingApprovals
		r.Approvals = &n
		if b.EngineEnd != nil {
			r.EngineEnd = terminal.SanitizeLine(b.EngineEnd.Status)
		}
	}
	if q := st.Queue; q != nil {
		n := waitingOf(q)
		r.Queue, r.QueuePaused = &n, q.Paused
	}
}

// listStream streams the list: the rows whenever they change.
func (s *Server) listStream(w http.ResponseWriter, r *http.Request) {
	if _, ok := s.guard(w, r); !ok {
		return
	}
	s.list.attach()
	defer s.list.detach()
	e := startSSE(w)
	tick := time.NewTicker(listEvery)
	defer tick.Stop()
	checked := time.Now()
	var last []byte
	for {
		rows, err := s.list.rows(r.Context())
		var b []byte
		if err != nil {
			b = mustJSON(map[string]any{"error": terminal.SanitizeLine(err.Error())})
		} else {
			b = mustJSON(map[string]any{"rows": rows})
		}
		if !bytes.Equal(b, last) {
			last = b
			e.send("rows", json.RawMessage(b))
		} else {
			e.w.Write([]byte(": heartbeat\n\n"))
		}
		if err := e.flush(); err != nil {
			return
		}
		select {
		case <-r.Context().Done():
			return
		case <-tick.C:
		case <-s.list.changed:
			time.Sleep(flushEvery)
		}
		if time.Since(checked) > heartbeat {
			checked = time.Now()
			if _, _, err := s.session(r); err != nil {
				e.send("gone", map[string]any{"message": "this browser session was revoked or expired: run `mosaicctl web` to log in again", "final": true})
				e.flush()
				return
			}
			if s.peerGone(e, r) {
				return
			}
		}
	}
}
