package queue

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
)

// Payload is one frozen text revision of an item: the admitted text or an
// edit of it. It never changes once written.
type Payload struct {
	Revision   int    `json:"revision"`
	Text       string `json:"text"`
	Digest     string `json:"digest"` // SHA-256 of Text
	Actor      string `json:"actor"`
	Connection string `json:"connection"`
	Generation int64  `json:"generation"`
	At         string `json:"at"` // RFC 3339
}

// NewPayload freezes text with its digest.
func NewPayload(rev int, text, actor, connection string, generation int64, at string) Payload {
	return Payload{Revision: rev, Text: text, Digest: Digest(text), Actor: actor, Connection: connection, Generation: generation, At: at}
}

// Digest is the SHA-256 of a text, in hex.
func Digest(text string) string {
	sum := sha256.Sum256([]byte(text))
	return hex.EncodeToString(sum[:])
}

// Dispatch is where and when an item was written to the engine.
type Dispatch struct {
	Execution  string `json:"execution"`
	Generation int64  `json:"generation"`
	// AfterSeq is the execution's newest event sequence number when the
	// item was dispatched: its turn's events come after it.
	AfterSeq uint64 `json:"afterSeq"`
	At       string `json:"at"`
	// SessionAt is the session file's size right before the engine
	// write: only user messages after it can prove the item delivered.
	// Absent when it could not be read; such an item is never proven.
	SessionAt *int64 `json:"sessionAt,omitempty"`
}

// Item is one revision of a queued prompt, whole.
type Item struct {
	ID       string `json:"id"`
	Seq      uint64 `json:"seq"` // admission order within the conversation
	Revision int    `json:"revision"`
	// State is a protocol receipt state (queued, dispatched, ...).
	State  string `json:"state"`
	Reason string `json:"reason,omitempty"`
	// Evidence is the engine's own words (a refusal text).
	Evidence string `json:"evidence,omitempty"`

	// Admission lineage: the request that admitted the item, its receipt
	// id and the command's fingerprint (the durable dedup key's value).
	Request     string `json:"request"`
	Receipt     string `json:"receipt"`
	Fingerprint string `json:"fingerprint"`
	Actor       string `json:"actor"`
	Connection  string `json:"connection"`
	Generation  int64  `json:"generation"`
	Execution   string `json:"execution"`
	Admitted    string `json:"admitted"` // RFC 3339

	Payloads []Payload `json:"payloads"`
	Dispatch *Dispatch `json:"dispatch,omitempty"`
	Updated  string    `json:"updated"` // RFC 3339
}

// Current is the payload the item would send: the newest.
func (it *Item) Current() Payload {
	if len(it.Payloads) == 0 {
		return Payload{}
	}
	return it.Payloads[len(it.Payloads)-1]
}

// Next returns a copy of it as its next revision; slices are copied so the
// caller's change never reaches the revision it came from.
func (it Item) Next() Item {
	it.Revision++
	it.Payloads = append([]Payload(nil), it.Payloads...)
	if it.Dispatch != nil {
		d := *it.Dispatch
		it.Dispatch = &d
	}
	return it
}

// check validates a decoded revision against where it was found.
func (it *Item) check(id string, rev int) error {
	switch {
	case it.ID != id:
		return fmt.Errorf("names item %q", it.ID)
	case it.Revision != rev:
		return fmt.Errorf("says revision %d", it.Revision)
	case it.State == "" || it.Request == "" || it.Receipt == "":
		return fmt.Errorf("lacks state, request or receipt")
	case len(it.Payloads) == 0:
		return fmt.Errorf("holds no payload")
	}
	for i, p := range it.Payloads {
		if Digest(p.Text) != p.Digest {
			return fmt.Errorf("payload %d does not match its digest", i+1)
		}
	}
	return nil
}
