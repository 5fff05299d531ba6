package fakepi

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/mosaic-agents/mosaic/contrib/stubmodel"
)

// maxEndless bounds an endless stream, so a forgotten fake ends.
const maxEndless = 10 * time.Minute

// newRun gives the agent a fresh abort signal, as each agent.prompt and
// agent.continue call in Pi does. Callers hold e.mu.
func (e *engine) newRun() context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	e.runCancel = cancel
	return ctx
}

// runPrompt is Pi's _runAgentPrompt: the agent loop, post-run continuations
// (retry, queued messages), then agent_settled.
func (e *engine) runPrompt(prompts []obj, idle chan struct{}) {
	e.pause(PointBeforeAgentStart, nil)
	e.mu.Lock()
	ctx := e.newRun()
	e.mu.Unlock()
	e.agentLoop(ctx, prompts)
	for e.postAgentRun() {
		e.mu.Lock()
		ctx = e.newRun()
		e.mu.Unlock()
		e.continueRun(ctx)
	}
	e.mu.Lock()
	e.streaming = false
	e.mu.Unlock()
	e.pause(PointBeforeAgentSettled, nil)
	e.mu.Lock()
	e.emit(obj{{"type", "agent_settled"}})
	close(idle)
	e.mu.Unlock()
}

// continueRun is agent.continue(): a queued message starts a new loop as
// its prompt; otherwise (a retry) the loop continues from the context.
func (e *engine) continueRun(ctx context.Context) {
	e.mu.Lock()
	q := e.pollSteering()
	if q == nil {
		q = e.pollFollowUp()
	}
	e.mu.Unlock()
	e.agentLoop(ctx, q)
}

// postAgentRun is Pi's _handlePostAgentRun: whether to run again.
func (e *engine) postAgentRun() bool {
	e.mu.Lock()
	msg, retryable := e.lastAsst, e.lastAsstRetr
	e.lastAsst, e.lastAsstRetr = nil, false
	if msg == nil {
		e.mu.Unlock()
		return false
	}
	if retryable && e.autoRetry {
		e.retryAttempt++
		if e.retryAttempt <= maxRetries {
			attempt := e.retryAttempt
			delay := baseRetryDelay * time.Duration(1<<(attempt-1))
			errMsg, _ := msg.get("errorMessage").(string)
			e.emit(obj{{"type", "auto_retry_start"}, {"attempt", attempt}, {"maxAttempts", maxRetries}, {"delayMs", delay.Milliseconds()}, {"errorMessage", errMsg}})
			if n := len(e.messages); n > 0 && e.messages[n-1].get("role") == "assistant" {
				e.messages = e.messages[:n-1]
			}
			ctx, cancel := context.WithCancel(context.Background())
			e.retryCancel = cancel
			e.mu.Unlock()
			e.pause(PointRetryWait, map[string]any{"attempt": attempt})
			t := time.NewTimer(e.retryDelay)
			cancelled := false
			select {
			case <-t.C:
			case <-ctx.Done():
				cancelled = true
			}
			t.Stop()
			e.mu.Lock()
			e.retryCancel = nil
			if cancelled || ctx.Err() != nil {
				e.retryAttempt = 0
				e.emit(obj{{"type", "auto_retry_end"}, {"success", false}, {"attempt", attempt}, {"finalError", "Retry cancelled"}})
				e.mu.Unlock()
				return false
			}
			cancel()
			e.mu.Unlock()
			return true
		}
		e.retryAttempt--
	}
	if msg.get("stopReason") == "error" && e.retryAttempt > 0 {
		errMsg, _ := msg.get("errorMessage").(string)
		e.emit(obj{{"type", "auto_retry_end"}, {"success", false}, {"attempt", e.retryAttempt}, {"finalError", errMsg}})
		e.retryAttempt = 0
	}
	more := len(e.aSteer)+len(e.aFollow) > 0
	e.mu.Unlock()
	return more
}

// agentLoop is pi-agent-core's runAgentLoop (prompts given) or
// runAgentLoopContinue (none): turns until no tool call, steering or
// follow-up is left, or the answer ends in error or abort.
func (e *engine) agentLoop(ctx context.Context, prompts []obj) {
	var newMessages []any
	e.mu.Lock()
	e.emit(obj{{"type", "agent_start"}})
	e.emit(obj{{"type", "turn_start"}})
	for _, p := range prompts {
		e.emitUser(p)
		newMessages = append(newMessages, p)
	}
	pending := e.pollSteering()
	e.mu.Unlock()
	for _, p := range prompts {
		e.pause(PointAfterUserMessage, map[string]any{"text": messageText(p)})
	}
	first := true
	for {
		more := true
		for more || len(pending) > 0 {
			if !first {
				e.mu.Lock()
				if len(pending) == 0 {
					pending = e.pollSteering()
				}
				e.emit(obj{{"type", "turn_start"}})
				e.mu.Unlock()
			}
			for _, m := range pending {
				e.mu.Lock()
				e.emitUser(m)
				e.mu.Unlock()
				newMessages = append(newMessages, m)
				e.pause(PointAfterUserMessage, map[string]any{"text": messageText(m)})
			}
			pending = nil
			msg, call := e.streamAssistant(ctx)
			newMessages = append(newMessages, msg)
			if sr := msg.get("stopReason"); sr == "error" || sr == "aborted" {
				e.mu.Lock()
				e.emit(obj{{"type", "turn_end"}, {"message", msg}, {"toolResults", []any{}}})
				e.mu.Unlock()
				e.agentEnd(newMessages)
				return
			}
			results := []any{}
			more = false
			if call != nil {
				tr := e.execTool(ctx, *call)
				results = append(results, tr)
				newMessages = append(newMessages, tr)
				more = true
			}
			e.mu.Lock()
			e.emit(obj{{"type", "turn_end"}, {"message", msg}, {"toolResults", results}})
			if fu := e.turnFollowUp; fu != "" {
				e.turnFollowUp = ""
				e.queueFollowUp(fu)
			}
			e.mu.Unlock()
			e.pause(PointAfterTurnEnd, nil)
			first = false
			e.mu.Lock()
			pending = e.pollSteering()
			e.mu.Unlock()
		}
		e.mu.Lock()
		fu := e.pollFollowUp()
		e.mu.Unlock()
		if fu != nil {
			pending = fu
			continue
		}
		break
	}
	e.agentEnd(newMessages)
}

func (e *engine) agentEnd(newMessages []any) {
	e.mu.Lock()
	willRetry := false
	if e.autoRetry && e.retryAttempt < maxRetries {
		for i := len(newMessages) - 1; i >= 0; i-- {
			if m, ok := newMessages[i].(obj); ok && m.get("role") == "assistant" {
				willRetry = m.get("stopReason") == "error" && e.lastAsstRetr
				break
			}
		}
	}
	e.mu.Unlock()
	e.pause(PointBeforeAgentEnd, map[string]any{"willRetry": willRetry})
	e.mu.Lock()
	if newMessages == nil {
		newMessages = []any{}
	}
	e.emit(obj{{"type", "agent_end"}, {"messages", newMessages}, {"willRetry", willRetry}})
	e.mu.Unlock()
}

// nextScriptTurn takes the next scripted answer, or the default one.
func (e *engine) nextScriptTurn() (stubmodel.Turn, int) {
	if e.nextTurn < len(e.script) {
		i := e.nextTurn
		e.nextTurn++
		return e.script[i], i
	}
	return stubmodel.Turn{Text: stubmodel.DefaultAnswer(e.lastUserText)}, -1
}

func (e *engine) update(usage obj, ev obj) {
	e.emit(obj{{"type", "message_update"}, {"usage", usage}, {"assistantMessageEvent", ev}})
}

// sleepCtx waits d or until ctx ends; false means aborted.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// finishAssistant records a finished assistant message: persisted, then
// message_end. Callers hold e.mu.
func (e *engine) finishAssistant(m obj, retryable bool) {
	e.persistMessage(m)
	e.emit(obj{{"type", "message_end"}, {"message", m}})
	e.messages = append(e.messages, m)
	e.lastAsst, e.lastAsstRetr = m, retryable
	if m.get("stopReason") != "error" && e.retryAttempt > 0 {
		e.emit(obj{{"type", "auto_retry_end"}, {"success", true}, {"attempt", e.retryAttempt}})
		e.retryAttempt = 0
	}
}

// streamAssistant is one model call: the scripted dialog, then the
// answer streamed as message_update deltas, or an abort/error message.
func (e *engine) streamAssistant(ctx context.Context) (obj, *stubmodel.ToolCall) {
	e.mu.Lock()
	turn, idx := e.nextScriptTurn()
	e.mu.Unlock()
	if len(turn.Notify) > 0 {
		e.mu.Lock()
		for _, m := range turn.Notify {
			e.emit(obj{{"type", "extension_ui_request"}, {"id", newUUID()}, {"method", "notify"}, {"message", m}, {"notifyType", "info"}})
		}
		e.mu.Unlock()
	}
	if turn.Dialog != nil {
		for i := 0; i < max(turn.Dialog.Repeat, 1) && ctx.Err() == nil; i++ {
			e.dialog(ctx, *turn.Dialog)
		}
	}
	e.pause(PointBeforeModelCall, map[string]any{"turn": idx})

	e.mu.Lock()
	base := obj{{"role", "assistant"}, {"content", []any{}}, {"api", e.api}, {"provider", e.provider}, {"model", e.modelID}}
	if ctx.Err() != nil {
		// The abort signal is already set: Pi makes no call and ends the
		// turn with this error message.
		m := append(base, kv{"usage", zeroUsage()}, kv{"stopReason", "error"}, kv{"errorMessage", "This operation was aborted"}, kv{"timestamp", ms(e.now())})
		e.emit(obj{{"type", "message_start"}, {"message", m}})
		e.finishAssistant(m, false)
		e.mu.Unlock()
		e.pause(PointAfterMessageEnd, map[string]any{"stopReason": "error"})
		return m, nil
	}
	e.callN++
	n := e.callN
	ts := ms(e.now())
	respID := fmt.Sprintf("chatcmpl-%d", n)
	e.turnFollowUp = turn.FollowUp
	start := append(append(obj{}, base...), kv{"usage", zeroUsage()}, kv{"stopReason", "pending"}, kv{"timestamp", ts}, kv{"responseId", respID})
	e.emit(obj{{"type", "message_start"}, {"message", start}})
	if turn.Error != "" {
		m := append(append(obj{}, base...), kv{"usage", zeroUsage()}, kv{"stopReason", "error"}, kv{"errorMessage", turn.Error}, kv{"timestamp", ts}, kv{"responseId", respID})
		e.finishAssistant(m, turn.Retryable)
		e.mu.Unlock()
		e.pause(PointAfterMessageEnd, map[string]any{"stopReason": "error"})
		return m, nil
	}
	e.mu.Unlock()

	delay := turn.ChunkDelay()
	text := ""
	textStarted := false
	aborted := false
	if e.flood.n > 0 { // the fan-out benchmark's answer replaces the script's
		turn = stubmodel.Turn{}
		text, aborted = e.floodText(ctx)
		textStarted = true
	}
	sendText := func(chunk string) bool {
		if !sleepCtx(ctx, delay) {
			return false
		}
		e.mu.Lock()
		defer e.mu.Unlock()
		if !textStarted {
			textStarted = true
			e.update(zeroUsage(), obj{{"type", "text_start"}, {"contentIndex", 0}})
		}
		text += chunk
		e.update(zeroUsage(), obj{{"type", "text_delta"}, {"contentIndex", 0}, {"delta", chunk}})
		return true
	}
	for _, c := range turn.Chunks() {
		if !sendText(c) {
			aborted = true
			break
		}
	}
	if !aborted && turn.Endless {
		deadline := time.Now().Add(maxEndless)
		for i := 0; ; i++ {
			if time.Now().After(deadline) || !sendText(fmt.Sprintf("w%d ", i)) {
				aborted = true
				break
			}
		}
	}
	var call *stubmodel.ToolCall
	toolIndex := 0
	if textStarted {
		toolIndex = 1
	}
	if !aborted && turn.Tool != nil {
		c := *turn.Tool
		e.mu.Lock()
		if c.ID == "" {
			e.toolN++
			c.ID = fmt.Sprintf("call_%d", n)
		}
		e.update(zeroUsage(), obj{{"type", "toolcall_start"}, {"contentIndex", toolIndex}, {"id", c.ID}, {"toolName", "bash"}})
		e.update(zeroUsage(), obj{{"type", "toolcall_delta"}, {"contentIndex", toolIndex}, {"delta", ""}})
		e.mu.Unlock()
		for _, part := range splitArgs(c.ToolArgsJSON(), 4) {
			if !sleepCtx(ctx, delay) {
				aborted = true
				break
			}
			e.mu.Lock()
			e.update(zeroUsage(), obj{{"type", "toolcall_delta"}, {"contentIndex", toolIndex}, {"delta", part}})
			e.mu.Unlock()
		}
		if !aborted {
			call = &c
		}
	}

	e.mu.Lock()
	content := []any{}
	if textStarted {
		content = append(content, textContent(text))
	}
	if aborted {
		if textStarted {
			e.update(zeroUsage(), obj{{"type", "text_end"}, {"contentIndex", 0}, {"content", text}})
		}
		m := append(append(obj{}, base...).with("content", content), kv{"usage", zeroUsage()}, kv{"stopReason", "aborted"}, kv{"timestamp", ts}, kv{"responseId", respID}, kv{"errorMessage", "Request was aborted"})
		e.finishAssistant(m, false)
		e.mu.Unlock()
		e.pause(PointAfterMessageEnd, map[string]any{"stopReason": "aborted"})
		return m, nil
	}
	usage := finalUsage(n)
	if textStarted {
		e.update(usage, obj{{"type", "text_end"}, {"contentIndex", 0}, {"content", text}})
	}
	stop, raw := "stop", "stop"
	if call != nil {
		tc := toolCallContent(call.ID, call.Command)
		content = append(content, tc)
		e.update(usage, obj{{"type", "toolcall_end"}, {"contentIndex", toolIndex}, {"toolCall", tc}})
		stop, raw = "toolUse", "tool_calls"
	}
	m := append(append(obj{}, base...).with("content", content), kv{"usage", usage}, kv{"stopReason", stop}, kv{"timestamp", ts}, kv{"responseId", respID}, kv{"rawStopReason", raw})
	e.finishAssistant(m, false)
	e.mu.Unlock()
	e.pause(PointAfterMessageEnd, map[string]any{"stopReason": stop})
	return m, call
}

// splitArgs cuts s into at most n pieces on rune boundaries.
func splitArgs(s string, n int) []string {
	r := []rune(s)
	size := (len(r) + n - 1) / n
	var out []string
	for len(r) > 0 {
		k := min(size, len(r))
		out = append(out, string(r[:k]))
		r = r[k:]
	}
	return out
}

// execTool runs the bash tool call for real and reports it as Pi does.
func (e *engine) execTool(ctx context.Context, call stubmodel.ToolCall) obj {
	args := obj{{"command", call.Command}}
	e.mu.Lock()
	e.emit(obj{{"type", "tool_execution_start"}, {"toolCallId", call.ID}, {"toolName", "bash"}, {"args", args}})
	e.emit(obj{{"type", "tool_execution_update"}, {"toolCallId", call.ID}, {"toolName", "bash"}, {"args", args}, {"partialResult", obj{{"content", []any{}}}}})
	e.mu.Unlock()
	res, err := runBash(ctx, call.Command, e.cwd,
		func(pid int) {
			e.pause(PointToolRunning, map[string]any{"pid": pid, "toolCallId": call.ID, "command": call.Command})
		},
		func(acc string) {
			e.mu.Lock()
			e.emit(obj{{"type", "tool_execution_update"}, {"toolCallId", call.ID}, {"toolName", "bash"}, {"args", args},
				{"partialResult", obj{{"content", []any{textContent(acc)}}, {"details", obj{}}}}})
			e.mu.Unlock()
		})
	if err != nil {
		res = bashResult{text: err.Error(), isError: true}
	}
	result := obj{{"content", []any{textContent(res.text)}}}
	if res.isError {
		result = append(result, kv{"details", obj{}})
	}
	e.mu.Lock()
	e.emit(obj{{"type", "tool_execution_end"}, {"toolCallId", call.ID}, {"toolName", "bash"}, {"result", result}, {"isError", res.isError}})
	tr := toolResultMessage(call.ID, res.text, res.isError, e.now())
	e.emitMessage(tr)
	e.mu.Unlock()
	e.pause(PointAfterToolEnd, nil)
	return tr
}

// dialog is an extension's dialog call: extension_ui_request, then wait
// for the matching extension_ui_response, the abort signal, or the
// timeout.
func (e *engine) dialog(ctx context.Context, d stubmodel.Dialog) json.RawMessage {
	id := newUUID()
	ch := make(chan json.RawMessage, 1)
	req := obj{{"type", "extension_ui_request"}, {"id", id}, {"method", d.Method}, {"title", d.Title}}
	switch d.Method {
	case "select":
		req = append(req, kv{"options", d.Options})
	case "confirm":
		req = append(req, kv{"message", d.Message})
	case "input":
		req = append(req, kv{"placeholder", d.Placeholder})
	case "editor":
		req = append(req, kv{"prefill", d.Prefill})
	}
	if d.TimeoutMS > 0 && d.Method != "editor" {
		req = append(req, kv{"timeout", d.TimeoutMS})
	}
	e.mu.Lock()
	e.dialogs[id] = ch
	e.emit(req)
	e.mu.Unlock()
	defer func() {
		e.mu.Lock()
		delete(e.dialogs, id)
		e.mu.Unlock()
	}()
	e.pause(PointDialogOpen, map[string]any{"id": id, "method": d.Method})
	var timeout <-chan time.Time
	if d.TimeoutMS > 0 {
		t := time.NewTimer(time.Duration(d.TimeoutMS) * time.Millisecond)
		defer t.Stop()
		timeout = t.C
	}
	select {
	case r := <-ch:
		return r
	case <-ctx.Done():
	case <-timeout:
	}
	return nil
}
