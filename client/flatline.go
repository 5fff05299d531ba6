package client

import (
	"bytes"

	"github.com/mosaic-agents/mosaic/protocol"
)

// A binding or a queue record goes to every connection at each change of
// the conversation's state, queue or control: a run's start and end bring
// a few of them, each of a kilobyte or two, and each client decoded every
// one the full way (Validate, then encoding/json's own validation and its
// decode: three passes and reflection), 14% of the CPU a 100-observer
// flood cost all the clients. flat decodes them in one pass, validating
// as it goes, as lineDecoder.event does events: only the shape the
// controller writes (no whitespace, each key one of the record's own names
// spelled exactly and at most once, string values, non-negative integers
// and booleans, a queue's items as objects of the same kind); anything
// else (null, a nested object such as a binding's engineEnd or restart, an
// unknown key, a surrogate escape) reports false and the line takes the
// full path. TestFlatLineMatchesFullDecode and FuzzFlatLine hold it to
// what the full path decodes and refuses.

var (
	bindingPrefix = []byte(`{"record":"binding",`)
	queuePrefix   = []byte(`{"record":"queue",`)
)

// flat decodes line when it is a binding or a queue record of the shape
// the controller writes.
func (d *lineDecoder) flat(line []byte) (Update, bool) {
	switch {
	case bytes.HasPrefix(line, bindingPrefix):
		b := &protocol.Binding{Record: protocol.RecordBinding}
		end, ok := members(line, len(bindingPrefix), func(key []byte, i int) (uint32, int, bool) {
			return d.bindingField(b, key, line, i)
		})
		if ok && end == len(line) {
			return Update{Record: protocol.RecordBinding, Raw: line, Binding: b}, true
		}
	case bytes.HasPrefix(line, queuePrefix):
		q := &protocol.Queue{Record: protocol.RecordQueue}
		end, ok := members(line, len(queuePrefix), func(key []byte, i int) (uint32, int, bool) {
			return d.queueField(q, key, line, i)
		})
		if ok && end == len(line) {
			return Update{Record: protocol.RecordQueue, Raw: line, Queue: q}, true
		}
	}
	return Update{}, false
}

// members reads the members of an object from the key at i up to and
// including its '}', each value by field, which says the key's bit (0 for
// a key the one-pass decoder does not take) and where its value ends. It
// returns the index after the '}'.
func members(line []byte, i int, field func(key []byte, i int) (bit uint32, next int, ok bool)) (int, bool) {
	var seen uint32
	for {
		key, next, ok := plainKey(line, i)
		if !ok {
			return 0, false
		}
		bit, next, ok := field(key, next)
		if !ok || bit == 0 || seen&bit != 0 || next >= len(line) {
			return 0, false
		}
		seen |= bit
		var closed bool
		if i, closed, ok = memberEnd(line, next); !ok || closed {
			return i, ok
		}
	}
}

// memberEnd reads what follows an object's member at i: a ',' and the
// next member's index, or the '}' that closes the object (closed) and the
// index after it.
func memberEnd(line []byte, i int) (next int, closed, ok bool) {
	if i >= len(line) {
		return 0, false, false
	}
	switch line[i] {
	case ',':
		return i + 1, false, true
	case '}':
		return i + 1, true, true
	}
	return 0, false, false
}

func (d *lineDecoder) bindingField(b *protocol.Binding, key, line []byte, i int) (uint32, int, bool) {
	switch string(key) {
	case "conversation":
		return d.text(1<<0, &b.Conversation, line, i)
	case "state":
		return d.text(1<<1, &b.State, line, i)
	case "admission":
		return d.text(1<<2, &b.Admission, line, i)
	case "admissionReason":
		return d.text(1<<3, &b.AdmissionReason, line, i)
	case "execution":
		return d.text(1<<4, &b.Execution, line, i)
	case "generation":
		return number(1<<5, &b.Generation, line, i)
	case "controller":
		return d.text(1<<6, &b.Controller, line, i)
	case "controllerConnected":
		return flag(1<<7, &b.ControllerConnected, line, i)
	case "sessionId":
		return d.text(1<<8, &b.SessionID, line, i)
	case "leaf":
		return d.text(1<<9, &b.Leaf, line, i)
	case "engine":
		return d.text(1<<10, &b.Engine, line, i)
	case "cohort":
		return d.text(1<<11, &b.Cohort, line, i)
	case "scope":
		return d.text(1<<12, &b.Scope, line, i)
	case "engineState":
		return d.text(1<<13, &b.EngineState, line, i)
	case "reconcile":
		return flag(1<<14, &b.Reconcile, line, i)
	case "lastStop":
		return d.text(1<<15, &b.LastStop, line, i)
	case "lateEvents":
		return number(1<<16, &b.LateEvents, line, i)
	case "pendingApprovals":
		return number(1<<17, &b.PendingApprovals, line, i)
	}
	return 0, 0, false
}

func (d *lineDecoder) queueField(q *protocol.Queue, key, line []byte, i int) (uint32, int, bool) {
	switch string(key) {
	case "request":
		return d.text(1<<0, &q.Request, line, i)
	case "revision":
		return number(1<<1, &q.Revision, line, i)
	case "paused":
		return flag(1<<2, &q.Paused, line, i)
	case "pauseReason":
		return d.text(1<<3, &q.PauseReason, line, i)
	case "items":
		next, ok := d.queueItems(&q.Items, line, i)
		return 1 << 4, next, ok
	}
	return 0, 0, false
}

// queueItems reads a queue's items at i: an array of objects. An empty
// array is an empty slice, not nil, as encoding/json makes it.
func (d *lineDecoder) queueItems(items *[]protocol.QueueItem, line []byte, i int) (int, bool) {
	if i+1 >= len(line) || line[i] != '[' {
		return 0, false
	}
	i++
	*items = []protocol.QueueItem{}
	if line[i] == ']' {
		return i + 1, true
	}
	for {
		if i+1 >= len(line) || line[i] != '{' {
			return 0, false
		}
		var it protocol.QueueItem
		next, ok := i+2, line[i+1] == '}'
		if !ok {
			next, ok = members(line, i+1, func(key []byte, i int) (uint32, int, bool) {
				return d.queueItemField(&it, key, line, i)
			})
		}
		if !ok || next >= len(line) {
			return 0, false
		}
		*items = append(*items, it)
		i = next
		switch line[i] {
		case ',':
			i++
		case ']':
			return i + 1, true
		default:
			return 0, false
		}
	}
}

func (d *lineDecoder) queueItemField(it *protocol.QueueItem, key, line []byte, i int) (uint32, int, bool) {
	switch string(key) {
	case "id":
		return d.text(1<<0, &it.ID, line, i)
	case "receipt":
		return d.text(1<<1, &it.Receipt, line, i)
	case "request":
		return d.text(1<<2, &it.Request, line, i)
	case "revision":
		return number(1<<3, &it.Revision, line, i)
	case "state":
		return d.text(1<<4, &it.State, line, i)
	case "text":
		return d.text(1<<5, &it.Text, line, i)
	case "digest":
		return d.text(1<<6, &it.Digest, line, i)
	case "original":
		return d.text(1<<7, &it.Original, line, i)
	case "edits":
		return number(1<<8, &it.Edits, line, i)
	case "actor":
		return d.text(1<<9, &it.Actor, line, i)
	case "connection":
		return d.text(1<<10, &it.Connection, line, i)
	case "generation":
		return number(1<<11, &it.Generation, line, i)
	case "execution":
		return d.text(1<<12, &it.Execution, line, i)
	case "afterSeq":
		return number(1<<13, &it.AfterSeq, line, i)
	case "reason":
		return d.text(1<<14, &it.Reason, line, i)
	case "evidence":
		return d.text(1<<15, &it.Evidence, line, i)
	}
	return 0, 0, false
}

// text reads the string at i into dst, for the key of bit.
func (d *lineDecoder) text(bit uint32, dst *string, line []byte, i int) (uint32, int, bool) {
	s, next, ok := d.value(line, i, false, nil)
	*dst = s
	return bit, next, ok
}

// number reads the non-negative integer at i into dst, for the key of
// bit: within Validate's safe range, and within T's, which an int of a
// 32-bit build is not (the full path refuses what does not fit).
func number[T int | int64 | uint64](bit uint32, dst *T, line []byte, i int) (uint32, int, bool) {
	n, next, ok := uint53(line, i)
	v := T(n)
	*dst = v
	return bit, next, ok && uint64(v) == n
}

// flag reads the boolean at i into dst, for the key of bit.
func flag(bit uint32, dst *bool, line []byte, i int) (uint32, int, bool) {
	v, next, ok := boolean(line, i)
	*dst = v
	return bit, next, ok
}
