package fakepi

// Pause points. A test arms a point through the control socket; the next
// time the fake reaches it, it reports {"paused":<point>,"detail":{...}} and
// blocks until the test releases it. Points marked "reader" block the stdin
// reader, so later commands wait, as they would behind a busy event loop;
// the others block only the agent run.
const (
	// PointPromptReceived (reader): a prompt line was parsed, before its
	// preflight (busy check, model and auth check). Detail: id, message.
	PointPromptReceived = "prompt-received"
	// PointBeforeResponse (reader): preflight passed; the success response
	// (accepted or queued) is not yet written. Detail: id, queued.
	PointBeforeResponse = "before-response"
	// PointBeforeAgentStart: the prompt response is out, isStreaming is
	// true, agent_start is not yet written.
	PointBeforeAgentStart = "before-agent-start"
	// PointAfterUserMessage: a user message_end was written and its entry
	// appended in memory (on disk only if the file already exists).
	// Detail: text.
	PointAfterUserMessage = "after-user-message"
	// PointBeforeModelCall: before an assistant message_start (one per
	// model call). Detail: turn (index into the script, -1 past its end).
	PointBeforeModelCall = "before-model-call"
	// PointAfterMessageEnd: an assistant message_end was written and its
	// entry persisted. Detail: stopReason.
	PointAfterMessageEnd = "after-message-end"
	// PointToolRunning: the bash tool's child runs. Detail: pid (also the
	// process group id), toolCallId, command.
	PointToolRunning = "tool-running"
	// PointAfterToolEnd: the toolResult message_end was written.
	PointAfterToolEnd = "after-tool-end"
	// PointAfterTurnEnd: turn_end was written (and a scripted extension
	// follow-up queued), before the steering queue is polled.
	PointAfterTurnEnd = "after-turn-end"
	// PointBeforeAgentEnd: before an agent_end. Detail: willRetry.
	PointBeforeAgentEnd = "before-agent-end"
	// PointRetryWait: auto_retry_start was written; the retry run has not
	// started. Detail: attempt.
	PointRetryWait = "retry-wait"
	// PointBeforeAgentSettled: the run is over and isStreaming is already
	// false (as in Pi, where the flag drops before the extension hook and
	// the event), agent_settled is not yet written. A prompt arriving now
	// is accepted.
	PointBeforeAgentSettled = "before-agent-settled"
	// PointDialogOpen: an extension_ui_request dialog was written; the
	// fake waits for the extension_ui_response. Detail: id, method.
	PointDialogOpen = "dialog-open"
	// PointClearQueueReceived (reader): a clear_queue line was parsed, the
	// queues are untouched.
	PointClearQueueReceived = "clear-queue-received"
	// PointAbortReceived (reader): an abort line was parsed, nothing is
	// aborted yet.
	PointAbortReceived = "abort-received"
	// PointBeforeAbortResponse: the abort finished (agent_settled written
	// when a run was active); the abort response is not yet written.
	PointBeforeAbortResponse = "before-abort-response"
	// PointStdinEOF (reader): stdin reached EOF; the fake has not exited.
	PointStdinEOF = "stdin-eof"
)

// Points lists every pause point, for documentation and validation.
var Points = []string{
	PointPromptReceived, PointBeforeResponse, PointBeforeAgentStart,
	PointAfterUserMessage, PointBeforeModelCall, PointAfterMessageEnd,
	PointToolRunning, PointAfterToolEnd, PointAfterTurnEnd, PointBeforeAgentEnd,
	PointRetryWait, PointBeforeAgentSettled, PointDialogOpen,
	PointClearQueueReceived, PointAbortReceived, PointBeforeAbortResponse,
	PointStdinEOF,
}

func knownPoint(p string) bool {
	for _, q := range Points {
		if q == p {
			return true
		}
	}
	return false
}
