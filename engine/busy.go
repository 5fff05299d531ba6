package engine

import (
	"errors"
	"strings"
)

// ErrNativeBusy is Pi refusing a prompt sent without streamingBehavior
// because a run is in progress (DIGEST §2): the prompt was not taken.
// errors.Is finds it in the error pi.Conn.Prompt returns for that answer, so
// callers never match Pi's wording themselves.
var ErrNativeBusy = errors.New("the engine is still processing; the prompt was not taken")

// piBusy is how pinned Pi words that refusal.
const piBusy = "Agent is already processing"

// Is makes a prompt refusal in Pi's busy wording match ErrNativeBusy.
func (e *NativeError) Is(target error) bool {
	return target == ErrNativeBusy && e.Command == "prompt" && strings.HasPrefix(e.Text, piBusy)
}
