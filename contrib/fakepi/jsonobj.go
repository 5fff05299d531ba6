package fakepi

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/mosaic-agents/mosaic/protocol"
)

// obj is a JSON object that keeps its key order, so the fake writes fields
// in the order the pinned Pi writes them (JavaScript keeps insertion
// order); a client that compares lines byte for byte sees the same text.
type obj []kv

type kv struct {
	k string
	v any
}

// MarshalJSON writes the pairs in order.
func (o obj) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, p := range o {
		if i > 0 {
			b.WriteByte(',')
		}
		k, err := json.Marshal(p.k)
		if err != nil {
			return nil, fmt.Errorf("key %q: %w", p.k, err)
		}
		b.Write(k)
		b.WriteByte(':')
		v, err := protocol.Marshal(p.v)
		if err != nil {
			return nil, fmt.Errorf("value of %q: %w", p.k, err)
		}
		b.Write(v)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// get returns the value of key k.
func (o obj) get(k string) any {
	for _, p := range o {
		if p.k == k {
			return p.v
		}
	}
	return nil
}

// with returns a copy of o with key k set to v (replaced in place, or
// appended).
func (o obj) with(k string, v any) obj {
	out := make(obj, 0, len(o)+1)
	found := false
	for _, p := range o {
		if p.k == k {
			out = append(out, kv{k, v})
			found = true
			continue
		}
		out = append(out, p)
	}
	if !found {
		out = append(out, kv{k, v})
	}
	return out
}
