package protocol

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// TestLineKeepsHTMLCharacters: <, > and & pass as they are, in strings and
// in raw values (json.Marshal escapes both); U+2028 stays escaped, and the
// record is one line.
func TestLineKeepsHTMLCharacters(t *testing.T) {
	ev := Event{Record: RecordEvent, Kind: EventToolStart, Text: "a<b>&c\u2028",
		Tool: &Tool{CallID: "c", Args: json.RawMessage(`{"command": "ls 2>&1 < in"}`)}}
	line, err := Line(ev)
	if err != nil {
		t.Fatal(err)
	}
	s := string(line)
	if !strings.HasSuffix(s, "}\n") || strings.Count(s, "\n") != 1 {
		t.Fatalf("not one line: %q", s)
	}
	for _, want := range []string{`"text":"a<b>&c\u2028"`, `"args":{"command":"ls 2>&1 < in"}`} {
		if !strings.Contains(s, want) {
			t.Fatalf("line %s lacks %s", s, want)
		}
	}
	m, err := Marshal(ev)
	if err != nil || string(m) != strings.TrimSuffix(s, "\n") {
		t.Fatalf("Marshal = %q, %v; want the line without its LF", m, err)
	}
	var back Event
	if err := json.Unmarshal(line, &back); err != nil || back.Text != ev.Text {
		t.Fatalf("round trip: %v, %q", err, back.Text)
	}
}

// TestLineWithIsLine: a record carrying a page that Marshal wrote is the
// same line, byte for byte, through LineWith as through Line, whatever the
// page and the record's other fields hold (HTML characters, U+2028, raw
// values written with spaces, text that looks like a marker), and the
// field is left holding the page.
func TestLineWithIsLine(t *testing.T) {
	type part struct {
		Text string          `json:"text"`
		Args json.RawMessage `json:"args,omitempty"`
	}
	for _, tc := range []struct {
		name, text string
		args       json.RawMessage
		request    string
	}{
		{"plain", "hello", nil, "o-1"},
		{"HTML and line separators", "a<b>&c\u2028d\u2029", json.RawMessage(`{"command": "ls 2>&1 < in",  "x" : [1, 2]}`), "o-2"},
		{"a marker's look-alike", `"mosaic-raw-00"`, nil, `"mosaic-raw-"`},
		{"big", strings.Repeat("The <quick> \"brown\" fox. ", 40000), nil, "o-3"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			page, err := Marshal(map[string]any{"parts": []part{{Text: tc.text, Args: tc.args}, {Text: "2"}}, "from": 7})
			if err != nil {
				t.Fatal(err)
			}
			obs := Observed{Record: RecordObserved, Request: tc.request, History: page, Cursor: "hc-1", Binding: Binding{State: tc.text}}
			want, err := Line(obs)
			if err != nil {
				t.Fatal(err)
			}
			obs.History = nil
			got, err := LineWith(&obs, &obs.History, page)
			if err != nil || string(got) != string(want) || string(obs.History) != string(page) {
				t.Fatalf("LineWith = %.200q, %v; want %.200q", got, err, want)
			}
			rec := PageRecord{Record: RecordPage, Request: tc.request}
			want, _ = Line(PageRecord{Record: RecordPage, Request: tc.request, History: page})
			if got, err := LineWith(&rec, &rec.History, page); err != nil || string(got) != string(want) {
				t.Fatalf("page record: LineWith = %.200q, %v; want %.200q", got, err, want)
			}
		})
	}
}

// BenchmarkLineWith compares LineWith with Line on an observed record
// carrying an 8 MiB page (x-line: LineWith's time over Line's).
func BenchmarkLineWith(b *testing.B) {
	var parts []map[string]string
	for range 90 {
		parts = append(parts, map[string]string{"text": strings.Repeat("The quick brown fox <jumps> \"over\" the lazy dog. ", 1800)})
	}
	page, _ := Marshal(map[string]any{"parts": parts})
	var with, line time.Duration
	for b.Loop() {
		obs := Observed{Record: RecordObserved, Request: "o-1"}
		t0 := time.Now()
		if _, err := LineWith(&obs, &obs.History, page); err != nil {
			b.Fatal(err)
		}
		with += time.Since(t0)
		obs.History = page
		t0 = time.Now()
		if _, err := Line(obs); err != nil {
			b.Fatal(err)
		}
		line += time.Since(t0)
	}
	b.ReportMetric(float64(with)/float64(line), "x-line")
	b.ReportMetric(float64(len(page)), "page-B")
}
