package main

import (
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/mosaic-agents/mosaic/contrib/sandboxtest"
	"github.com/mosaic-agents/mosaic/conversations"
	"github.com/mosaic-agents/mosaic/protocol"
)

const anID = "pi-0123456789abcdef0123"

// TestInterspersed checks the argv step against the real command tree:
// flags after positionals move in front, a value-taking flag keeps its
// value, and everything after `--` stays positional.
func TestInterspersed(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   string
		want string // "" with err
		err  string
	}{
		{"flag after id", "prompt ID --take hi", "prompt --take -- ID hi", ""},
		{"flags first already", "prompt --take ID hi", "prompt --take -- ID hi", ""},
		{"value flag keeps its value", "prompt ID hi --timeout 5s --take", "prompt --timeout 5s --take -- ID hi", ""},
		{"value flag with =", "prompt ID --timeout=5s hi", "prompt --timeout=5s -- ID hi", ""},
		{"value that looks like a flag", "stop ID --proof --yes", "stop --proof --yes -- ID", ""},
		{"double dash ends flags", "prompt ID --take -- --json -x", "prompt --take -- ID --json -x", ""},
		{"stdin dash is positional", "prompt ID - --take", "prompt --take -- ID -", ""},
		{"status json after id", "status ID --json", "status --json -- ID", ""},
		{"subcommand", "conv show ID --help", "conv show --help -- ID", ""},
		{"subcommand value flags", "conv add --project /p --seat s --session /p/x.jsonl --tasks-max 5", "conv add --project /p --seat s --session /p/x.jsonl --tasks-max 5", ""},
		{"unknown flag is passed on", "stop ID --bogus", "stop --bogus -- ID", ""},
		{"no positionals", "status --json", "status --json", ""},
		{"help is left alone", "help prompt --take", "help prompt --take", ""},
		{"app flags", "--help", "--help", ""},
		{"value flag of a command with subcommands", "web --addr h:1 --no-browser", "web --addr h:1 --no-browser", ""},
		{"subcommand after its parent's flag", "web --no-browser sessions --store /s", "web --no-browser sessions --store /s", ""},
		{"queue hint as typed", "queue resume --take ID", "queue --take -- resume ID", ""},
		{"queue edit hint as typed", "queue edit --take ID item-1 TEXT", "queue --take -- edit ID item-1 TEXT", ""},
		{"value flag last", "stop --take --yes ID --proof", "", "flag --proof needs a value; see `mosaicctl stop --help`"},
		{"value flag before double dash", "prompt ID --timeout -- hi", "", "flag --timeout needs a value; see `mosaicctl prompt --help`"},
		{"unknown command", "promt ID hi", "", `unknown command "promt" (did you mean "prompt"?); see ` + "`mosaicctl --help`"},
		{"unknown command far from any", "frobnicate ID", "", `unknown command "frobnicate"; see ` + "`mosaicctl --help`"},
		{"unknown subcommand", "conv remove ID", "", `unknown command "remove"; see ` + "`mosaicctl conv --help`"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := append([]string{"mosaicctl"}, strings.Fields(strings.ReplaceAll(tc.in, "ID", anID))...)
			got, err := interspersed(newApp(), in)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("interspersed(%q) = %q, %v; want the error %q", tc.in, got, err, tc.err)
				}
				return
			}
			want := append([]string{"mosaicctl"}, strings.Fields(strings.ReplaceAll(tc.want, "ID", anID))...)
			if err != nil || !slices.Equal(got, want) {
				t.Fatalf("interspersed(%q) = %q, %v; want %q", tc.in, got, err, want)
			}
		})
	}
}

// TestCommandLineRefusals runs the built mosaicctl as a user types it:
// each refusal is one line on stderr that names the fix, exit 2, and no
// help page. None of these reaches systemd.
func TestCommandLineRefusals(t *testing.T) {
	bin := sandboxtest.Bin(t, "mosaicctl")
	home := t.TempDir()
	notID := `mosaicctl: unknown-conversation: "pi-12" is not a conversation id (pi- and 20 hex digits); see ` + "`mosaicctl conv list`\n"
	for _, tc := range []struct {
		args   string
		stderr string
	}{
		{"prompt pi-12 hi", notID},
		{"prompt pi-12 --take hi", notID},
		{"stop pi-12 --yes", notID},
		{"interrupt pi-12", notID},
		{"interrupt PI-0123456789ABCDEF0123", "mosaicctl: unknown-conversation: \"PI-0123456789ABCDEF0123\" is not a conversation id: ids are lower case " +
			"(did you mean pi-0123456789abcdef0123?); see `mosaicctl conv list`\n"},
		{"recover pi-12 --take", notID},
		{"status pi-12 --json", notID},
		{"attach pi-12", notID},
		{"hello pi-12", notID},
		{"audit pi-12", notID},
		{"conv show pi-12", notID},
		{"conv rm pi-12", notID},
		{"frobnicate", "mosaicctl: usage: unknown command \"frobnicate\"; see `mosaicctl --help`\n"},
		{"doctor units", "mosaicctl: usage: doctor takes no arguments, got [\"units\"]: it runs every check (user-manager, xdg-homes, " +
			"linger, journal, cgroup, engine-confinement, yama, engine-pins, env-files, units, idle-policy)\n"},
		{"help frobnicate", "mosaicctl: usage: unknown command \"frobnicate\"; see `mosaicctl --help`\n"},
		{"conv remove " + anID, "mosaicctl: usage: unknown command \"remove\"; see `mosaicctl conv --help`\n"},
		{"conv add --seat s", "mosaicctl: usage: `mosaicctl conv add` needs --project; see `mosaicctl conv add --help`\n"},
		{"conv add --project /p --seat s", "mosaicctl: usage: conv add needs --session FILE for a Pi conversation (or --engine-kind claude)\n"},
		{"conv add --project /p --seat s --session /p/x.jsonl --thinking banana",
			"mosaicctl: usage: --thinking \"banana\" is not a level Pi accepts; use one of off, minimal, low, medium, high, xhigh, max\n"},
		{"serve", "mosaicctl: usage: `mosaicctl serve` needs --conversation; see `mosaicctl serve --help`\n"},
		{"stop " + anID + " --yse", "mosaicctl: usage: unknown flag --yse (did you mean --yes?); see `mosaicctl stop --help`\n"},
		{"prompt --tkae " + anID + " hi", "mosaicctl: usage: unknown flag --tkae (did you mean --take?); see `mosaicctl prompt --help`\n"},
		{"stop " + anID + " --bogus", "mosaicctl: usage: unknown flag --bogus; see `mosaicctl stop --help`\n"},
		{"stop --take --yes " + anID + " --proof", "mosaicctl: usage: flag --proof needs a value; see `mosaicctl stop --help`\n"},
		{"stop --take --yes --timeout -1s " + anID, "mosaicctl: usage: --timeout -1s is negative: give a duration such as 30s or 5m, or 0 to wait for ever\n"},
		{"proof verify /nonexistent/proof.json", "mosaicctl: proof-file: open /nonexistent/proof.json: no such file or directory; " +
			"name the file `mosaicctl stop --proof FILE` wrote, or - to read the proof from standard input\n"},
		{"prompt " + anID, "mosaicctl: usage: `mosaicctl prompt` wants a conversation id and one text argument, got 1 arguments: " +
			"quote the text, put `--` before a text that starts with -, or give - to read it from standard input\n"},
		{"queue frob " + anID, "mosaicctl: usage: unknown queue command \"frob\": `mosaicctl queue` takes ID, `cancel ID ITEM`, " +
			"`edit ID ITEM TEXT|-` or `resume ID`; see `mosaicctl queue --help`\n"},
		{"queue resume", "mosaicctl: usage: `mosaicctl queue resume` wants a conversation id, got 0 arguments\n"},
		{"approve", "mosaicctl: usage: `mosaicctl approve` wants a conversation id and, to answer, optionally an approval id, got 0 arguments; " +
			"see `mosaicctl approve --help`\n"},
		{"approve " + anID + " a-1 a-2", "mosaicctl: usage: `mosaicctl approve` wants a conversation id and, to answer, optionally an approval id, got 3 arguments; " +
			"see `mosaicctl approve --help`\n"},
		// A command that takes no arguments refuses one rather than drop
		// it: `install global` is not `install --global`.
		{"install global", "mosaicctl: usage: `mosaicctl install` takes no arguments, got [\"global\"]; see `mosaicctl install --help`\n"},
		{"uninstall global --force", "mosaicctl: usage: `mosaicctl uninstall` takes no arguments, got [\"global\"]; see `mosaicctl uninstall --help`\n"},
		{"conv list all", "mosaicctl: usage: `mosaicctl conv list` takes no arguments, got [\"all\"]; see `mosaicctl conv list --help`\n"},
		{"conv add /p --seat s --session /p/x.jsonl", "mosaicctl: usage: `mosaicctl conv add` takes no arguments, got [\"/p\"]; see `mosaicctl conv add --help`\n"},
		{"web sessions all", "mosaicctl: usage: `mosaicctl web sessions` takes no arguments, got [\"all\"]; see `mosaicctl web sessions --help`\n"},
		{"stop " + anID + " " + anID, "mosaicctl: usage: `mosaicctl stop` wants exactly one conversation id, got 2 arguments; see `mosaicctl conv list`\n"},
	} {
		t.Run(tc.args, func(t *testing.T) {
			cmd := exec.Command(bin, strings.Fields(tc.args)...)
			cmd.Env = append(cmd.Environ(), "XDG_CONFIG_HOME="+home, "XDG_STATE_HOME="+home)
			r := runCmd(t, cmd)
			if r.code != 2 || r.stderr != tc.stderr || r.stdout != "" {
				t.Fatalf("mosaicctl %s: exit %d\nstdout %q\nstderr %q\nwant exit 2, no stdout and stderr %q", tc.args, r.code, r.stdout, r.stderr, tc.stderr)
			}
		})
	}
}

// TestNoEngineHint: for a conversation without an engine the hint is a
// conv add line with its own settings, quoted for a shell.
func TestNoEngineHint(t *testing.T) {
	_, cv := storedConversation(t, "/home/a/my app", conversations.Engine{Model: "m"})
	err := withHint(protocol.Refuse("no-engine", "no engine runs in this conversation (idle)"), "prompt", cv.ID)
	want := "no-engine: no engine runs in this conversation (idle); conversation " + cv.ID + " has no engine; add one with " +
		"`mosaicctl conv add --engine PATH --replace --project '/home/a/my app' --seat alice --workspace default " +
		"--session '/home/a/my app/.pi/state/alice/sessions/main.jsonl' --model m`"
	if err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Fatalf("hint:\n%v\nwant it to start\n%s", err, want)
	}
}

// TestNoEngineHintIdle: an idle controller's reason is about the settings
// it started with. When it found no engine and one was added since (conv
// add --replace), the hint says the controller still runs with the old
// settings and needs the restart, never the new path with the old reason.
func TestNoEngineHintIdle(t *testing.T) {
	for _, tc := range []struct {
		name, reason string
		want, not    []string
	}{
		{name: "an engine added since the controller started",
			reason: "configuration: conversation pi-x has no engine; add it again with `mosaicctl conv add --engine PATH --replace`",
			want: []string{"the controller still runs with the settings it started with, which had no engine (configuration: ",
				"the engine /opt/pi/bin/pi added since applies when it restarts: `systemctl --user restart mosaic-conv@"},
			not: []string{"did not launch the engine"}},
		{name: "an env file that is not 0600",
			reason: "env-file: /k/claude.env is mode 0644, not 0600",
			want:   []string{"the controller did not launch the engine /opt/pi/bin/pi: env-file: /k/claude.env is mode 0644", "fix that, then `systemctl --user restart mosaic-conv@"},
			not:    []string{"still runs with the settings"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, cv := storedConversation(t, "/home/a/app", conversations.Engine{Path: "/opt/pi/bin/pi", Entry: "/opt/pi/lib/cli.js"})
			got := noEngineHint(cv.ID, &protocol.Binding{State: "idle", AdmissionReason: tc.reason})
			for _, w := range tc.want {
				if !strings.Contains(got, w) {
					t.Errorf("hint %q; want it to say %q", got, w)
				}
			}
			for _, n := range tc.not {
				if strings.Contains(got, n) {
					t.Errorf("hint %q; want it not to say %q", got, n)
				}
			}
		})
	}
}
