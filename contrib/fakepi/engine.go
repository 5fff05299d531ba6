package fakepi

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/mosaic-agents/mosaic/contrib/stubmodel"
	"github.com/mosaic-agents/mosaic/protocol"
)

// busyText is the refusal of a prompt without streamingBehavior while Pi
// streams, exactly as the pinned Pi words it.
const busyText = "Agent is already processing. Specify streamingBehavior ('steer' or 'followUp') to queue the message."

// noAPIKeyText is the pinned Pi's refusal of a prompt with no usable model.
// The real text names docs paths inside the Pi installation; the fake
// names /fakepi/docs.
const noAPIKeyText = "No API key found for the selected model.\n\nUse /login to log into a provider via OAuth or API key. See:\n  /fakepi/docs/providers.md\n  /fakepi/docs/models.md"

// maxRetries and baseRetryDelay are Pi's auto-retry defaults.
const (
	maxRetries     = 3
	baseRetryDelay = 2000 * time.Millisecond
)

// engine is the fake Pi's whole state. One mutex guards it; every stdout
// line is written with it held, so the order of lines always agrees with
// the state a command observes.
type engine struct {
	mu   sync.Mutex
	out  io.Writer
	wmu  sync.Mutex
	ctl  *controlServer
	sess *session
	cwd  string
	now  func() time.Time

	hasModel bool
	model    obj
	provider string
	modelID  string
	api      string
	thinking string

	script   []stubmodel.Turn
	nextTurn int
	callN    int
	toolN    int

	streaming    bool
	idle         chan struct{}
	runCancel    context.CancelFunc
	retryCancel  context.CancelFunc
	retryAttempt int
	autoRetry    bool
	retryDelay   time.Duration

	messages     []obj
	steering     []string
	followUp     []string
	aSteer       []obj
	aFollow      []obj
	lastAsst     obj
	lastAsstRetr bool
	lastUserText string

	dialogs      map[string]chan json.RawMessage
	turnFollowUp string

	flood floodSpec // FAKEPI_FLOOD: stamped deltas per answer (flood.go)
}

// emit writes one JSON record and LF. Callers hold e.mu.
func (e *engine) emit(v any) {
	b, err := protocol.Marshal(v)
	if err != nil {
		b = []byte(fmt.Sprintf(`{"type":"fakepi_error","error":%q}`, err.Error()))
	}
	e.wmu.Lock()
	defer e.wmu.Unlock()
	_, _ = e.out.Write(append(b, '\n'))
}

func (e *engine) pause(point string, detail map[string]any) { e.ctl.pause(point, detail) }

func response(id json.RawMessage, command string, success bool) obj {
	o := obj{}
	if len(id) > 0 {
		o = append(o, kv{"id", id})
	}
	o = append(o, kv{"type", "response"})
	if command != "" {
		o = append(o, kv{"command", command})
	}
	return append(o, kv{"success", success})
}

func (e *engine) respondOK(id json.RawMessage, command string, data any) {
	o := response(id, command, true)
	if data != nil {
		o = append(o, kv{"data", data})
	}
	e.emit(o)
}

func (e *engine) respondErr(id json.RawMessage, command, msg string) {
	e.emit(append(response(id, command, false), kv{"error", msg}))
}

func unknownModel() obj {
	return obj{{"id", "unknown"}, {"name", "unknown"}, {"api", "unknown"}, {"provider", "unknown"}, {"baseUrl", ""},
		{"reasoning", false}, {"input", []any{}},
		{"cost", obj{{"input", 0}, {"output", 0}, {"cacheRead", 0}, {"cacheWrite", 0}}},
		{"contextWindow", 0}, {"maxTokens", 0}}
}

// lookupModel builds get_state's model object from the agent dir's
// models.json, as Pi would, or a plain default when it is not there.
func lookupModel(agentDir, provider, id string) (obj, string) {
	var cfg struct {
		Providers map[string]struct {
			BaseURL string          `json:"baseUrl"`
			API     string          `json:"api"`
			Compat  json.RawMessage `json:"compat"`
			Models  []struct {
				ID            string          `json:"id"`
				Name          string          `json:"name"`
				API           string          `json:"api"`
				Reasoning     bool            `json:"reasoning"`
				Input         []string        `json:"input"`
				ContextWindow int             `json:"contextWindow"`
				MaxTokens     int             `json:"maxTokens"`
				Compat        json.RawMessage `json:"compat"`
			} `json:"models"`
		} `json:"providers"`
	}
	costObj := obj{{"input", 0}, {"output", 0}, {"cacheRead", 0}, {"cacheWrite", 0}}
	if agentDir != "" {
		if b, err := os.ReadFile(filepath.Join(agentDir, "models.json")); err == nil && json.Unmarshal(b, &cfg) == nil {
			if p, ok := cfg.Providers[provider]; ok {
				for _, m := range p.Models {
					if m.ID != id {
						continue
					}
					api := m.API
					if api == "" {
						api = p.API
					}
					name := m.Name
					if name == "" {
						name = m.ID
					}
					input := m.Input
					if input == nil {
						input = []string{"text"}
					}
					o := obj{{"id", m.ID}, {"name", name}, {"api", api}, {"provider", provider}, {"baseUrl", p.BaseURL},
						{"reasoning", m.Reasoning}, {"input", input}, {"cost", costObj},
						{"contextWindow", m.ContextWindow}, {"maxTokens", m.MaxTokens}}
					compat := m.Compat
					if len(compat) == 0 {
						compat = p.Compat
					}
					if len(compat) > 0 {
						o = append(o, kv{"compat", compat})
					}
					return o, api
				}
			}
		}
	}
	return obj{{"id", id}, {"name", id}, {"api", "openai-completions"}, {"provider", provider}, {"baseUrl", ""},
		{"reasoning", false}, {"input", []string{"text"}}, {"cost", costObj},
		{"contextWindow", 128000}, {"maxTokens", 4096}}, "openai-completions"
}

func newUUID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = 0x40 | (b[6] & 0x0f)
	b[8] = 0x80 | (b[8] & 0x3f)
	h := hex.EncodeToString(b[:])
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:32]
}

// queueUpdate writes queue_update with the session's queued texts.
func (e *engine) queueUpdate() {
	e.emit(obj{{"type", "queue_update"}, {"steering", append([]string{}, e.steering...)}, {"followUp", append([]string{}, e.followUp...)}})
}

func (e *engine) queueSteer(text string) {
	e.steering = append(e.steering, text)
	e.queueUpdate()
	e.aSteer = append(e.aSteer, userMessage(text, e.now()))
}

func (e *engine) queueFollowUp(text string) {
	e.followUp = append(e.followUp, text)
	e.queueUpdate()
	e.aFollow = append(e.aFollow, userMessage(text, e.now()))
}

// pollSteering takes one queued steering message (one-at-a-time mode).
func (e *engine) pollSteering() []obj {
	if len(e.aSteer) == 0 {
		return nil
	}
	m := e.aSteer[0]
	e.aSteer = e.aSteer[1:]
	return []obj{m}
}

func (e *engine) pollFollowUp() []obj {
	if len(e.aFollow) == 0 {
		return nil
	}
	m := e.aFollow[0]
	e.aFollow = e.aFollow[1:]
	return []obj{m}
}

func removeFirst(list []string, s string) ([]string, bool) {
	for i, x := range list {
		if x == s {
			return append(append([]string{}, list[:i]...), list[i+1:]...), true
		}
	}
	return list, false
}

// persistMessage appends a message entry; the fake writes the entry before
// the message_end line, so a client that reads message_end finds the entry
// on disk (Pi normally, though not strictly, has it there by then).
func (e *engine) persistMessage(m obj) {
	if _, err := e.sess.append("message", obj{{"message", m}}); err != nil {
		e.emit(obj{{"type", "fakepi_error"}, {"error", err.Error()}})
	}
}

// emitMessage writes message_start and message_end for a whole message,
// persisting it in between as Pi does for user and toolResult messages.
func (e *engine) emitMessage(m obj) {
	e.emit(obj{{"type", "message_start"}, {"message", m}})
	e.persistMessage(m)
	e.emit(obj{{"type", "message_end"}, {"message", m}})
	e.messages = append(e.messages, m)
}

// emitUser delivers a user message; a queued one leaves the session's
// queue first, with a queue_update, as in Pi.
func (e *engine) emitUser(m obj) {
	text := messageText(m)
	if text != "" {
		var ok bool
		if e.steering, ok = removeFirst(e.steering, text); ok {
			e.queueUpdate()
		} else if e.followUp, ok = removeFirst(e.followUp, text); ok {
			e.queueUpdate()
		}
	}
	e.lastUserText = text
	e.emitMessage(m)
}
