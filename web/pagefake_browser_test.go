package web_test

import (
	"encoding/json"
	"fmt"
	"html/template"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// fakeConv serves the conversation page's own files (conv.html and its
// scripts, from this package's static directory) with a scripted event
// stream and command endpoint in place of the server's tab: what the page
// does with what reaches it — an agent's flood, a stream before the
// binding, a reply lost — tested in Chromium without a controller.
type fakeConv struct {
	t      *testing.T
	base   string
	events chan string
	mu     sync.Mutex
	cmds   []map[string]any
	// reply answers a command; nil answers {"reply":{}}.
	reply func(w http.ResponseWriter, op string)
}

const fakeID = "demo"

func startFakeConv(t *testing.T) *fakeConv {
	t.Helper()
	page, err := template.ParseFiles("static/conv.html")
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeConv{t: t, events: make(chan string, 4096)}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /c/{id}", func(w http.ResponseWriter, r *http.Request) {
		page.Execute(w, struct{ CSRF, ID string }{"csrf", fakeID})
	})
	mux.Handle("GET /static/", http.StripPrefix("/static/", http.FileServer(http.Dir("static"))))
	mux.HandleFunc("GET /api/c/{id}/events", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		rc := http.NewResponseController(w)
		rc.Flush()
		for {
			select {
			case <-r.Context().Done():
				return
			case ev := <-f.events:
				fmt.Fprint(w, ev)
				if len(f.events) == 0 {
					rc.Flush()
				}
			}
		}
	})
	mux.HandleFunc("POST /api/c/{id}/command", func(w http.ResponseWriter, r *http.Request) {
		var body map[string]any
		json.NewDecoder(r.Body).Decode(&body)
		f.mu.Lock()
		f.cmds = append(f.cmds, body)
		reply := f.reply
		f.mu.Unlock()
		op, _ := body["op"].(string)
		if reply != nil {
			reply(w, op)
			return
		}
		fmt.Fprint(w, `{"reply":{}}`)
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	f.base = srv.URL
	return f
}

// emit sends one server-sent event to the open page.
func (f *fakeConv) emit(event string, v any) {
	f.t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		f.t.Fatal(err)
	}
	f.events <- fmt.Sprintf("event: %s\ndata: %s\n\n", event, b)
}

// commands returns the ops the page posted, in order.
func (f *fakeConv) commands() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var ops []string
	for _, c := range f.cmds {
		op, _ := c["op"].(string)
		ops = append(ops, op)
	}
	return ops
}

// open opens the page in a fresh browser and waits for its stream.
func (f *fakeConv) open(t *testing.T) *page {
	t.Helper()
	p := newPage(t, startBrowser(t), "page")
	p.run("open the page", chromedp.Navigate(f.base+"/c/"+fakeID))
	p.soon("the page's script", `typeof window.mosaicState === "function"`)
	return p
}

// openFlooded opens the page bound in mode and sends it n events, the
// i-th one ev(i) names: an engine's flood, as the stream passes it on.
func openFlooded(t *testing.T, mode string, n int, ev func(i int) (string, any)) *page {
	t.Helper()
	f := startFakeConv(t)
	p := f.open(t)
	f.emit("state", boundState(mode))
	for i := range n {
		f.emit(ev(i))
	}
	return p
}

// soon waits until the JavaScript expression is true, for a page fed by
// this test alone (no engine, nothing slow behind it).
func (p *page) soon(what, js string) {
	p.t.Helper()
	p.run("wait for "+what, chromedp.Poll[chromedp.Void](js, chromedp.WithPollingTimeout(15*time.Second), chromedp.WithPollingInterval(50*time.Millisecond)))
}

// boundState is a state event of a bound view at generation 3.
func boundState(mode string) map[string]any {
	return map[string]any{"conversation": fakeID, "tab": "t1", "connection": "k-1", "mode": mode, "bound": true,
		"generation": 3, "execution": "x-1", "controller": "k-1", "controllerConnected": true, "state": "bound",
		"admission": "open", "engineState": "idle"}
}
