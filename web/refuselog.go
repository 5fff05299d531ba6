package web

import (
	"fmt"
	"net/http"

	"github.com/mosaic-agents/mosaic/audit"
	"github.com/mosaic-agents/mosaic/protocol"
)

// maxLoggedPath bounds the request path a log line quotes: a URL may be
// about a megabyte long, and the refused sender chooses it.
const maxLoggedPath = 200

// logRefusal writes one refusal through the audit logger the controller
// uses for its socket's peers: every field bounded (audit.MaxField,
// audit.MaxMessage), and per (refusal, code) only the first audit.Burst of
// each audit.Window written whole, the rest counted into one "N more"
// entry that names up to eight of the connections. A process that floods
// the web port with refused requests thereby costs the journal a few
// dozen lines, not one per request, and cannot crowd out what follows.
func (s *Server) logRefusal(r *http.Request, ref *protocol.Refusal) {
	if s.refusals == nil {
		return
	}
	conn := r.RemoteAddr
	if conn == "" || conn == "@" {
		conn = "unix" // the Unix socket's peer has no address: one key for all
	}
	s.refusals.Log(audit.Entry{
		Event:      audit.Refusal,
		Connection: conn,
		Refusal:    ref.Code,
		Message:    fmt.Sprintf("refused %s %s: %s: %s", clip(r.Method, 16), clip(r.URL.Path, maxLoggedPath), ref.Code, ref.Message),
	})
}
