package fakeanthropic

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"
)

func post(t *testing.T, s *Server, body string) []map[string]any {
	t.Helper()
	resp, err := http.Post(s.URL+"/v1/messages?beta=true", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var evs []map[string]any
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if d, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
			var ev map[string]any
			if err := json.Unmarshal([]byte(d), &ev); err != nil {
				t.Fatalf("data line %q: %v", d, err)
			}
			evs = append(evs, ev)
		}
	}
	return evs
}

// TestScript: each marker gets its reply, scripted on the last block of
// the last user message, and every request is logged.
func TestScript(t *testing.T) {
	s, err := Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	s.KeepBodies()
	cases := []struct {
		name, body, reply, arg, stop string
		input                        float64 // input_tokens reported; 0 for the default
	}{
		{"text", `{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"<system-reminder>x</system-reminder>"},{"type":"text","text":"hi"}]},{"role":"system","content":"env"}]}`, "text", "Hello from fake. You said: hi", "end_turn", 0},
		{"bash", `{"model":"m","messages":[{"role":"user","content":"please BASH{echo a & b}"}]}`, "tool", "echo a & b", "tool_use", 0},
		{"bash in the background", `{"model":"m","messages":[{"role":"user","content":"please BASHBG{sleep 1}"}]}`, "tool", "sleep 1", "tool_use", 0},
		{"tool result", `{"model":"m","messages":[{"role":"user","content":"x"},{"role":"assistant","content":[]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":[{"type":"text","text":"out"}]}]}]}`, "text", "TOOL_DONE: out", "end_turn", 0},
		{"full context", `{"model":"m","messages":[{"role":"user","content":"FULLCONTEXT please"}]}`, "text", "Hello from fake. You said: FULLCONTEXT please", "end_turn", FullContextTokens},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			evs := post(t, s, c.body)
			if len(evs) < 4 || evs[0]["type"] != "message_start" || evs[len(evs)-1]["type"] != "message_stop" {
				t.Fatalf("events %v", evs)
			}
			md := evs[len(evs)-2]["delta"].(map[string]any)
			if md["stop_reason"] != c.stop {
				t.Errorf("stop reason %v, want %s", md["stop_reason"], c.stop)
			}
			usage := evs[0]["message"].(map[string]any)["usage"].(map[string]any)
			if in := usage["input_tokens"].(float64); (c.input != 0 && in != c.input) || (c.input == 0 && in >= FullContextTokens) {
				t.Errorf("input_tokens %v, want %v", in, c.input)
			}
			if b := s.Bodies(); len(b) != i+1 || string(b[i]) != c.body {
				t.Errorf("kept bodies %q; want the %d requests, the last %q", b, i+1, c.body)
			}
			r := s.Requests()[i]
			if r.Reply != c.reply || r.Arg != c.arg || r.Unexpected {
				t.Errorf("logged %+v, want reply %s arg %q", r, c.reply, c.arg)
			}
		})
	}
}

// TestUnexpectedLogged: anything but POST /v1/messages is a 404 and
// logged as unexpected, so a test asserting Unexpected() is empty fails
// when the CLI phones home.
func TestUnexpectedLogged(t *testing.T) {
	s, err := Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	req, _ := http.NewRequest(http.MethodHead, s.URL+"/api/hello", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("status %d", resp.StatusCode)
	}
	if u := s.Unexpected(); len(u) != 1 || u[0].Path != "/api/hello" {
		t.Errorf("unexpected log %+v", u)
	}
}

// TestHangEndsWithClient: a HANG reply streams a first delta and then
// holds the stream until the client closes it.
func TestHangEndsWithClient(t *testing.T) {
	s, err := Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, s.URL+"/v1/messages", strings.NewReader(`{"model":"m","messages":[{"role":"user","content":"HANG"}]}`))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(resp.Body)
	deltas := 0
	for deltas == 0 && sc.Scan() {
		if strings.Contains(sc.Text(), "text_delta") {
			deltas++
		}
	}
	resp.Body.Close()
	if deltas == 0 {
		t.Fatal("no delta before the hang")
	}
	if r := s.Requests(); len(r) != 1 || r[0].Reply != "hang" {
		t.Errorf("log %+v", r)
	}
}
