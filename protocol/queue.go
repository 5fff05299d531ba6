package protocol

// Queue is the conversation's prompt queue as every client sees it: sent
// after the welcome, on every change (revisioned) and inside observed.
type Queue struct {
	Record string `json:"record"` // "queue"
	// Request is set on the reply to edit-queued, cancel-queued and
	// resume-queue.
	Request string `json:"request,omitempty"`
	// Revision grows by one with every change this controller publishes.
	Revision uint64 `json:"revision"`
	// Paused holds dispatch (an interrupt, a takeover, a restart) until
	// the controller resumes the queue.
	Paused      bool        `json:"paused"`
	PauseReason string      `json:"pauseReason,omitempty"`
	Items       []QueueItem `json:"items"`
	// NotPaused is set on the reply to a resume-queue that found the
	// queue not paused: nothing was resumed (dispatch is still authorised
	// under the resuming generation), and the client can say so rather
	// than imply it lifted a pause.
	NotPaused bool `json:"notPaused,omitempty"`
}

// QueueItem is one item: waiting ones first in order, then the most recent
// finished ones (without text).
type QueueItem struct {
	ID       string `json:"id"`
	Receipt  string `json:"receipt"`
	Request  string `json:"request"`
	Revision int    `json:"revision"`
	State    string `json:"state"`
	// Text is the current frozen text (waiting items only); Digest its
	// SHA-256; Original the digest of the admitted text, unchanged by edits.
	Text       string `json:"text,omitempty"`
	Digest     string `json:"digest"`
	Original   string `json:"original"`
	Edits      int    `json:"edits"`
	Actor      string `json:"actor"`
	Connection string `json:"connection"`
	Generation int64  `json:"generation"`
	Execution  string `json:"execution,omitempty"`
	AfterSeq   uint64 `json:"afterSeq,omitempty"`
	Reason     string `json:"reason,omitempty"`
	Evidence   string `json:"evidence,omitempty"`
}
