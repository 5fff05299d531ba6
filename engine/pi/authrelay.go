package pi

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"math"
	"slices"
	"strings"
	"time"
)

// RelayAuth compares the user's auth.json (user) with an engine's copy of
// it (own) and says what each should become so that an OAuth login
// refreshed on one side reaches the other: toUser is the user's file with
// the engine's refreshes in it, toOwn the copy with refreshes the engine
// has not seen (another conversation's, or a login the user renewed);
// each is nil where nothing changes, and back and forward name the
// providers that move.
//
// Forward, from the user's file, a newer login moves, and the user's
// login while it is good over any other in the copy. Back, from a copy a
// tool can write, only what a refresh of Pi's could have written:
//   - the three fields a refresh changes (access, refresh, expires) of a
//     provider that is an OAuth login on both sides, so no key, no
//     "!command" (which Pi runs to read a key), no provider is added, no
//     key turned into a login;
//   - only of a provider whose tokens are bearer keys and nothing more
//     (refreshable): GitHub Copilot's access token names the API host its
//     requests go to, and a provider unknown here may do the same;
//   - only once the user's login has expired (within expirySlack): Pi
//     refreshes no login earlier, so a copy with a newer login before
//     then holds a token a tool put there;
//   - and only a well-formed login (sane, at most maxAhead ahead).
//
// What a tool can still do is put a token of its own, of the same
// provider (and for openai-codex the same account), in the window
// between the login's expiry and the first refresh written: the next
// conversations use it until the user logs in again (docs/security.md).
//
// A file that is not a JSON object, and a provider that is not a
// well-formed login on either side, are left alone.
func RelayAuth(user, own []byte, now time.Time) (toUser, toOwn []byte, back, forward []string) {
	u, uok := parseAuth(user)
	o, ook := parseAuth(own)
	if !uok || !ook {
		return nil, nil, nil, nil
	}
	limit := float64(now.Add(maxAhead).UnixMilli())
	for _, p := range sortedKeys(u) {
		ul, ok1 := loginOf(u[p])
		ol, ok2 := loginOf(o[p])
		if !ok1 || !ok2 || ul.same(ol) {
			continue
		}
		switch {
		case ol.Expires > ul.Expires && ol.Expires <= limit && ol.sane() && ul.expired(now) && refreshable(p, ul, ol):
			if raw, ok := ol.into(u[p]); ok {
				u[p], back = raw, append(back, p)
			}
		case ul.Expires > ol.Expires || !ul.expired(now):
			// A newer login, or the user's still good one over a copy
			// that holds another (a tool's, one the user replaced by
			// logging in again): never the user's expired one over the
			// engine's own refresh.
			if raw, ok := ul.into(o[p]); ok {
				o[p], forward = raw, append(forward, p)
			}
		}
	}
	if len(back) > 0 {
		toUser = encodeAuth(u)
	}
	if len(forward) > 0 {
		toOwn = encodeAuth(o)
	}
	return toUser, toOwn, back, forward
}

// maxAhead bounds the expiry a relayed login may claim: providers issue
// access tokens for hours or days. An expiry further ahead would hold
// the user's file against every real refresh after it (only a later
// expiry moves), so it is not taken.
const maxAhead = 90 * 24 * time.Hour

// maxToken bounds a relayed token's length; real ones are a few KiB.
const maxToken = 16 << 10

// expirySlack is how long before its recorded expiry a login counts as
// expired to the relay: Pi refreshes a login that expires within five
// minutes when a request needs it (pi-ai's resolveStoredOAuth), and the
// relay may see the refresh a little later.
const expirySlack = 6 * time.Minute

func (l login) expired(now time.Time) bool {
	return float64(now.Add(expirySlack).UnixMilli()) >= l.Expires
}

// refreshable says whether a refresh of provider p's login, from was to
// now, may go back to the user's file: p is a built-in OAuth provider of
// Pi's whose access token is only a bearer key, and for openai-codex the
// account its token names stays the same.
func refreshable(p string, was, now login) bool {
	switch p {
	case "anthropic", "xai", "kimi-coding", "openrouter":
		return true
	case "openai-codex":
		a := codexAccount(was.Access)
		return a != "" && a == codexAccount(now.Access)
	}
	return false
}

// codexAccount is the ChatGPT account an openai-codex access token (a
// JWT) names, as Pi reads it to address its requests; "" if none.
func codexAccount(token string) string {
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return ""
	}
	payload, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(parts[1], "="))
	if err != nil {
		return ""
	}
	// Maps, not structs: Pi looks the names up exactly, and
	// encoding/json would match a struct's field in any case.
	var claims, auth map[string]json.RawMessage
	var account string
	if json.Unmarshal(payload, &claims) != nil || json.Unmarshal(claims["https://api.openai.com/auth"], &auth) != nil ||
		json.Unmarshal(auth["chatgpt_account_id"], &account) != nil {
		return ""
	}
	return account
}

// login is the part of an OAuth credential a refresh changes. Expires is
// milliseconds since the epoch, as Pi compares it with Date.now().
type login struct {
	Type    string  `json:"type"`
	Access  string  `json:"access"`
	Refresh string  `json:"refresh"`
	Expires float64 `json:"expires"`
}

// loginOf reads raw as an OAuth credential in the shape Pi accepts
// (type "oauth", string access and refresh, a finite number expires).
func loginOf(raw json.RawMessage) (login, bool) {
	if raw == nil {
		return login{}, false
	}
	var fields map[string]json.RawMessage
	if json.Unmarshal(raw, &fields) != nil {
		return login{}, false
	}
	var l login
	if json.Unmarshal(fields["type"], &l.Type) != nil || l.Type != "oauth" ||
		json.Unmarshal(fields["access"], &l.Access) != nil ||
		json.Unmarshal(fields["refresh"], &l.Refresh) != nil ||
		json.Unmarshal(fields["expires"], &l.Expires) != nil || math.IsInf(l.Expires, 0) || math.IsNaN(l.Expires) {
		return login{}, false
	}
	return l, true
}

func (l login) same(o login) bool {
	return l.Access == o.Access && l.Refresh == o.Refresh && l.Expires == o.Expires
}

// sane refuses what no provider issues: empty or oversized tokens.
func (l login) sane() bool {
	return l.Access != "" && l.Refresh != "" && len(l.Access) <= maxToken && len(l.Refresh) <= maxToken
}

// into writes l's three fields into the credential raw, keeping every
// other field of it as it is.
func (l login) into(raw json.RawMessage) (json.RawMessage, bool) {
	var fields map[string]json.RawMessage
	if json.Unmarshal(raw, &fields) != nil {
		return nil, false
	}
	for k, v := range map[string]any{"access": l.Access, "refresh": l.Refresh, "expires": l.Expires} {
		b, err := json.Marshal(v)
		if err != nil {
			return nil, false
		}
		fields[k] = b
	}
	b, err := json.Marshal(fields)
	return b, err == nil
}

// parseAuth reads an auth.json as Pi does: an object of credentials.
// Empty input is the empty file Pi treats as none.
func parseAuth(b []byte) (map[string]json.RawMessage, bool) {
	b = bytes.TrimPrefix(b, []byte("\ufeff"))
	if len(bytes.TrimSpace(b)) == 0 {
		return map[string]json.RawMessage{}, true
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(b, &m) != nil || m == nil {
		return nil, false
	}
	return m, true
}

// encodeAuth writes credentials as Pi does (two-space indent, no HTML
// escaping), providers in key order.
func encodeAuth(m map[string]json.RawMessage) []byte {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if enc.Encode(m) != nil {
		return nil
	}
	return buf.Bytes()
}

func sortedKeys(m map[string]json.RawMessage) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// HoldsLogin says whether the auth.json auth holds an OAuth login in the
// shape Pi refreshes: only then does Pi ever write the file. One that
// holds none (keys only, nothing, or no JSON) Pi only reads, so its
// engine's copy can be sealed read-only (scopes.Spec.Sealed), which keeps
// an api_key "!command" out of it.
func HoldsLogin(auth []byte) bool {
	a, ok := parseAuth(auth)
	if !ok {
		return false
	}
	for _, raw := range a {
		if _, ok := loginOf(raw); ok {
			return true
		}
	}
	return false
}
