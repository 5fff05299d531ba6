package stubmodel_test

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mosaic-agents/mosaic/contrib/stubmodel"
)

// chunks posts a chat request and returns the SSE data payloads.
func chunks(t *testing.T, ctx context.Context, base, user string) []string {
	t.Helper()
	body := `{"model":"fake-model","stream":true,"messages":[{"role":"user","content":[{"type":"text","text":` + mustJSON(t, user) + `}]}]}`
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/chat/completions", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer x")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out []string
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if d, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
			out = append(out, d)
		}
	}
	return out
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestScriptedTurns(t *testing.T) {
	srv, err := stubmodel.Start(stubmodel.Script{Turns: []stubmodel.Turn{
		{Text: []string{"a", "b"}, Tool: &stubmodel.ToolCall{Command: "echo hi"}, ChunkDelayMS: 1},
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	tests := []struct {
		name   string
		user   string
		finish string
		has    []string
	}{
		{"tool turn", "hi", `"finish_reason":"tool_calls"`, []string{`"content":"a"`, `"name":"bash"`, `"id":"call_1"`}},
		{"default answer", "again", `"finish_reason":"stop"`, []string{`"content":"again"`, `"content":"Plain "`}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := strings.Join(chunks(t, ctx, srv.BaseURL(), tc.user), "\n")
			for _, want := range append(tc.has, tc.finish, `"usage"`, "[DONE]") {
				if !strings.Contains(got, want) {
					t.Errorf("stream lacks %s:\n%s", want, got)
				}
			}
		})
	}
	reqs := srv.Requests()
	if len(reqs) != 2 || !reqs[0].AuthPresent || reqs[1].LastUserText != "again" {
		t.Errorf("requests: %+v", reqs)
	}
}

func TestEndlessStreamEndsOnDisconnect(t *testing.T) {
	srv, err := stubmodel.Start(stubmodel.Script{Turns: []stubmodel.Turn{{Endless: true, ChunkDelayMS: 1}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	reqCtx, stop := context.WithCancel(ctx)
	req, err := http.NewRequestWithContext(reqCtx, http.MethodPost, srv.BaseURL()+"/chat/completions", strings.NewReader(`{"messages":[]}`))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(resp.Body)
	for n := 0; n < 5 && sc.Scan(); {
		if strings.HasPrefix(sc.Text(), "data: ") {
			n++
		}
	}
	stop()
	resp.Body.Close()
	for {
		if r := srv.Requests(); len(r) == 1 && r[0].Disconnected {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatal("disconnect not recorded")
		case <-time.After(5 * time.Millisecond):
		}
	}
}

func TestWriteAgentDir(t *testing.T) {
	dir := t.TempDir()
	m, err := stubmodel.WriteAgentDir(dir, "http://127.0.0.1:1/v1")
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, "models.json"))
	if err != nil {
		t.Fatal(err)
	}
	var cfg struct {
		Providers map[string]struct {
			API    string `json:"api"`
			APIKey string `json:"apiKey"`
			Models []struct {
				ID string `json:"id"`
			} `json:"models"`
		} `json:"providers"`
	}
	if err := json.Unmarshal(b, &cfg); err != nil {
		t.Fatal(err)
	}
	p := cfg.Providers[m.Provider]
	if p.API != "openai-completions" || p.APIKey == "" || len(p.Models) != 1 || p.Models[0].ID != m.Model {
		t.Errorf("models.json: %s", b)
	}
}
