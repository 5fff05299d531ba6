package engine

import (
	"strings"
	"unicode"

	"github.com/mosaic-agents/mosaic/protocol"
)

// Prefix is one row of the slash-policy table: a text prefix and what
// pinned Pi 0.85.1 does with it when it arrives as an RPC prompt message.
type Prefix struct {
	// Prefix is matched at the start of the text after leading whitespace
	// and invisible format characters.
	Prefix string
	// Interpreted is true when Pi's RPC prompt path acts on the prefix
	// instead of sending the text to the model. Interpreted rows refuse.
	Interpreted bool
	// What says what Pi does with it.
	What string
	// Source is the file and line in the pinned npm package
	// (@earendil-works/pi-coding-agent 0.85.1) that decides it. The code
	// that runs is the bundle (dist/bundle/chunks/chunk-JVUZSMYM.js); the
	// unbundled dist/ files named here hold the same statements.
	Source string
}

// Prefixes is the one table of prompt prefixes, used by CheckText and by
// the tests (S1, S2). Pi tests each with String.startsWith at index 0 of
// the raw message (no trimming), so a leading space already defeats Pi's
// own check; the policy still refuses after whitespace because the
// contract (CHAT-01) forbids a first non-whitespace slash and because an
// extension `input` handler could trim before acting.
var Prefixes = []Prefix{
	{"/", true, "extension command named by the first word runs at once, even while streaming; no LLM turn (the inline /llama command is registered even with --no-extensions)", "dist/core/agent-session.js:828"},
	{"/skill:", true, "skill expansion of /skill:name args (before the queueing decision)", "dist/core/agent-session.js:984"},
	{"/", true, "prompt template expansion of /name args (before the queueing decision)", "dist/core/prompt-templates.js:222"},
	{"!", false, "bash shortcut (! and !!) exists only in the interactive editor; RPC prompt sends it as text", "dist/modes/interactive/interactive-mode.js:2502"},
	{"@", false, "file reference exists only for CLI arguments; RPC prompt sends it as text", "dist/cli/args.js:214"},
}

// LaterLineSlashInterpreted records that Pi never looks past index 0: a
// slash at the start of a later line is plain text (S3). Source: the
// startsWith checks at dist/core/agent-session.js:828 and 984 and
// dist/core/prompt-templates.js:222, whose template regexp is anchored at
// the start of the whole string.
const LaterLineSlashInterpreted = false

// CheckText refuses text whose first visible characters are a prefix pinned
// Pi interprets. The refusal happens before any byte is written, so a
// refused prompt never reaches the engine.
//
// The message is read by whoever typed the text (mosaicctl, attach, the
// web page): it says what to send instead, since white space before the
// slash is refused too and so is no way around it. The row's Source (a
// file of Pi's package) stays in the table and the docs: it means
// nothing to the user and names no fix.
func CheckText(text string) error {
	rest := strings.TrimLeftFunc(text, ignorable)
	for _, p := range Prefixes {
		if p.Interpreted && strings.HasPrefix(rest, p.Prefix) {
			return protocol.Refuse(protocol.CodeTextPolicy,
				"a text whose first visible character is %q runs as an engine command instead of reaching the model, even after white space; nothing was sent: put a word or a quote before the slash, as in %q or %q",
				p.Prefix, "explain "+example(rest), "'"+example(rest)+"'")
		}
	}
	return nil
}

// example is the start of rest (a text beginning with a slash) as the
// refusal shows it rewritten: its first word, at most 24 characters, so
// the suggestion is the user's own command and stays one short line.
func example(rest string) string {
	w := strings.FieldsFunc(rest, ignorable)[0]
	if r := []rune(w); len(r) > 24 {
		w = string(r[:24])
	}
	return w
}

// ignorable reports characters that do not count as the first character:
// Unicode white space (what JavaScript's trim removes, and more) and
// invisible format characters such as U+FEFF, U+200B and bidi controls, so
// a slash cannot hide behind them.
func ignorable(r rune) bool {
	return unicode.IsSpace(r) || unicode.Is(unicode.Cf, r) || r == '\uFEFF'
}
