package main

import (
	"fmt"
	"strings"

	"github.com/mosaic-agents/mosaic/units"
	"github.com/urfave/cli/v2"
)

// Man pages are written as roff here rather than with urfave/cli's ToMan:
// that renders one page for the whole tree through a Markdown converter,
// while man(1) users expect `man mosaicctl-prompt`, and plain roff from a
// few macros (TH, SH, TP, PP, nf) renders without a warning under
// `man --warnings`, which the packaging test checks.

// exitStatuses are docs/cli.md's "Exit statuses", for every page.
var exitStatuses = [][2]string{
	{"0", "done as asked: the answer was printed, the turn reconciled, the cohort stopped with a proof, the new execution launched."},
	{"1", "an error before anything was decided: no socket, no user manager, a broken connection before sending."},
	{"2", "refused: nothing was done (by the controller, or by the command before sending; a bad command line is refused \\fBusage\\fR). The refusal code comes first on standard error: \\fBmosaicctl: CODE: message\\fR."},
	{fmt.Sprint(exitUnknown), "outcome unknown: a command was sent and its reply (or, for prompt, the end of its turn) never arrived. Never send it again as new; look at the transcript first."},
	{fmt.Sprint(exitUnsettled), "done, not as asked: the engine refused the prompt, the turn was interrupted, stopped or ended in error, a stop ended uncertain, a launch did not become active."},
}

// manPages renders mosaicctl(1), mosaicctl-VERB(1) for every visible
// command (subcommands on their parent's page) and mosaic-conv@.service(5).
func manPages(app *cli.App) []units.File {
	cmds := visible(app.Commands)
	out := []units.File{{Name: "mosaicctl.1", Data: []byte(mainPage(app, cmds))}}
	for _, c := range cmds {
		out = append(out, units.File{Name: "mosaicctl-" + c.Name + ".1", Data: []byte(verbPage(c))})
	}
	return append(out, units.File{Name: "mosaic-conv@.service.5", Data: []byte(unitsPage())})
}

// roff escapes text for a roff line: backslashes, dashes (so options
// copy as ASCII minus) and a leading control character.
func roff(s string) string {
	s = strings.ReplaceAll(s, `\`, `\e`)
	s = strings.ReplaceAll(s, "-", `\-`)
	return s
}

// para writes text as filled paragraphs: a blank line starts a new one,
// and no line may start with a control character.
func para(b *strings.Builder, text string) {
	for i, p := range strings.Split(strings.TrimSpace(text), "\n\n") {
		if i > 0 {
			b.WriteString(".PP\n")
		}
		for _, line := range strings.Split(p, "\n") {
			line = strings.TrimSpace(line)
			if line == "" {
				continue
			}
			if line[0] == '.' || line[0] == '\'' {
				b.WriteString(`\&`)
			}
			b.WriteString(roff(line) + "\n")
		}
	}
}

func header(b *strings.Builder, name, section string) {
	fmt.Fprintf(b, ".TH %s %s \"\" \"mosaic %s\" \"mosaic manual\"\n", roff(strings.ToUpper(name)), section, roff(version))
}

func flagsSection(b *strings.Builder, title string, fs []flagDoc) {
	if len(fs) == 0 {
		return
	}
	fmt.Fprintf(b, ".SH %s\n", title)
	for _, f := range fs {
		b.WriteString(".TP\n")
		var ns []string
		for _, n := range f.names {
			s := `\fB` + roff(dashed(n)) + `\fR`
			if f.arg != "" {
				s += ` \fI` + roff(f.arg) + `\fR`
			}
			ns = append(ns, s)
		}
		b.WriteString(strings.Join(ns, ", ") + "\n")
		para(b, f.usage)
	}
}

func exitSection(b *strings.Builder) {
	b.WriteString(".SH EXIT STATUS\n")
	for _, e := range exitStatuses {
		fmt.Fprintf(b, ".TP\n.B %s\n%s\n", e[0], e[1])
	}
}

func seeAlso(b *strings.Builder, refs ...string) {
	b.WriteString(".SH SEE ALSO\n")
	for i, r := range refs {
		name, sec, _ := strings.Cut(r, "(")
		sep := ","
		if i == len(refs)-1 {
			sep = ""
		}
		fmt.Fprintf(b, ".BR %s (%s%s\n", roff(name), sec, sep)
	}
}

func mainPage(app *cli.App, cmds []*cli.Command) string {
	var b strings.Builder
	header(&b, "mosaicctl", "1")
	fmt.Fprintf(&b, ".SH NAME\nmosaicctl \\- %s\n", roff(app.Usage))
	b.WriteString(".SH SYNOPSIS\n.B mosaicctl\n\\fICOMMAND\\fR [\\fIOPTIONS\\fR] [\\fIARGUMENTS\\fR]\n")
	b.WriteString(".SH DESCRIPTION\n")
	para(&b, `mosaicctl installs, runs and drives mosaic conversations. A conversation is one coding-agent session (the Pi coding agent) with one controller process that owns the engine's standard input; clients connect to the conversation's Unix socket.
systemd socket-activates the controller (mosaic-conv@ID.socket and mosaic-conv@ID.service, see mosaic-conv@.service(5)), the engine runs in a transient scope of its own, and a force stop ends as stopped only with a proof that every process of the engine's cohort is gone.

Flags may come before or after the positional arguments; -- ends the flags. Each command has its own page, mosaicctl-COMMAND(1).`)
	b.WriteString(".SH COMMANDS\n")
	for _, c := range cmds {
		fmt.Fprintf(&b, ".TP\n\\fB%s\\fR\n", roff(c.Name))
		para(&b, c.Usage+"; see mosaicctl-"+c.Name+"(1).")
	}
	flagsSection(&b, "OPTIONS", []flagDoc{
		{names: []string{"help", "h"}, usage: "show help"},
		{names: []string{"version", "v"}, usage: "print the version"},
	})
	exitSection(&b)
	b.WriteString(".SH EXAMPLES\n.nf\n")
	for _, l := range []string{
		"id=$(mosaicctl conv add --project ~/src/app --seat alice \\e",
		"      --session ~/src/app/.pi/state/alice/sessions/main.jsonl \\e",
		"      --engine ~/.local/lib/pi/bin/pi)",
		"systemctl --user start mosaic-conv@$id.socket",
		"mosaicctl prompt --take $id 'list the files'",
		"mosaicctl stop --take --yes --proof proof.json $id",
		"mosaicctl proof verify proof.json",
	} {
		b.WriteString(strings.ReplaceAll(l, "-", `\-`) + "\n")
	}
	b.WriteString(".fi\n")
	refs := []string{"mosaic-conv@.service(5)"}
	for _, c := range cmds {
		refs = append(refs, "mosaicctl-"+c.Name+"(1)")
	}
	seeAlso(&b, append(refs, "systemctl(1)", "journalctl(1)")...)
	return b.String()
}

func verbPage(c *cli.Command) string {
	var b strings.Builder
	header(&b, "mosaicctl-"+c.Name, "1")
	fmt.Fprintf(&b, ".SH NAME\nmosaicctl\\-%s \\- %s\n", roff(c.Name), roff(c.Usage))
	b.WriteString(".SH SYNOPSIS\n")
	subs := visible(c.Subcommands)
	if len(subs) == 0 {
		fmt.Fprintf(&b, ".B mosaicctl %s\n[\\fIOPTIONS\\fR]", roff(c.Name))
		if c.ArgsUsage != "" {
			fmt.Fprintf(&b, " \\fI%s\\fR", roff(c.ArgsUsage))
		}
		b.WriteString("\n")
	} else {
		for i, s := range subs {
			if i > 0 {
				b.WriteString(".br\n")
			}
			fmt.Fprintf(&b, ".B mosaicctl %s %s\n[\\fIOPTIONS\\fR]", roff(c.Name), roff(s.Name))
			if s.ArgsUsage != "" {
				fmt.Fprintf(&b, " \\fI%s\\fR", roff(s.ArgsUsage))
			}
			b.WriteString("\n")
		}
	}
	b.WriteString(".SH DESCRIPTION\n")
	desc := c.Description
	if desc == "" {
		desc = strings.ToUpper(c.Usage[:1]) + c.Usage[1:] + "."
	}
	para(&b, desc)
	flagsSection(&b, "OPTIONS", flagDocs(c.Flags))
	for _, s := range subs {
		fmt.Fprintf(&b, ".SH %s %s\n", roff(strings.ToUpper(c.Name)), roff(strings.ToUpper(s.Name)))
		d := s.Description
		if d == "" {
			d = strings.ToUpper(s.Usage[:1]) + s.Usage[1:] + "."
		}
		para(&b, d)
		for _, f := range flagDocs(s.Flags) {
			b.WriteString(".TP\n")
			n := `\fB` + roff("--"+f.names[0]) + `\fR`
			if f.arg != "" {
				n += ` \fI` + roff(f.arg) + `\fR`
			}
			b.WriteString(n + "\n")
			para(&b, f.usage)
		}
	}
	exitSection(&b)
	seeAlso(&b, "mosaicctl(1)", "mosaic-conv@.service(5)")
	return b.String()
}

// unitsPage is mosaic-conv@.service(5): the units, where they come from,
// the files a conversation keeps and the exit statuses.
func unitsPage() string {
	var b strings.Builder
	header(&b, "mosaic-conv@.service", "5")
	b.WriteString(".SH NAME\nmosaic-conv@.service, mosaic-conv@.socket \\- the systemd user units of one mosaic conversation\n")
	b.WriteString(".SH SYNOPSIS\n")
	for i, n := range units.Names {
		if i > 0 {
			b.WriteString(".br\n")
		}
		fmt.Fprintf(&b, "%s\n", roff(n))
	}
	b.WriteString(".SH DESCRIPTION\n")
	para(&b, `Every conversation has an id (pi- and 20 hex digits, see mosaicctl conv list) and runs as the instance of two template units of the user's systemd manager.

mosaic-conv@ID.socket listens at $XDG_RUNTIME_DIR/mosaic/conv/ID.sock, mode 0600 in a directory of mode 0700. Starting it (systemctl --user start mosaic-conv@ID.socket) starts no process; enabling it starts it with the user manager.

The first connection socket-activates mosaic-conv@ID.service, which runs mosaicctl serve --conversation ID: the controller. It launches the engine into a transient scope of its own, mosaic-engine-CONVERSATION-EXECUTION.scope, so stopping the socket or the service ends the controller but never the engine or any process the agent started. Only a confirmed force stop (mosaicctl stop) ends the engine, and it ends as stopped only with a proof of the whole cohort.

The controller logs its decisions and refusals to the journal: journalctl --user -x -u mosaic-conv@ID.service shows them with their explanations from the message catalog.

mosaic-web.socket listens on 127.0.0.1:7433 and at $XDG_RUNTIME_DIR/mosaic/web.sock and socket-activates mosaic-web.service, which runs mosaicctl web serve: the web surface, one more client of the conversation sockets, which exits after ten minutes with no browser attached. mosaicctl web prints its one-time login link.`)
	b.WriteString(".SH UNIT FILES\n")
	para(&b, `The same two files, rendered from one template, come from three places; the user manager takes the first it finds:`)
	for _, d := range [][2]string{
		{"$XDG_CONFIG_HOME/systemd/user/", "written by mosaicctl install for the calling user."},
		{units.GlobalDir + "/", "written by mosaicctl install --global for every user."},
		{"/usr/lib/systemd/user/", "installed by the package, naming /usr/bin/mosaicctl."},
	} {
		fmt.Fprintf(&b, ".TP\n.I %s\n%s\n", roff(d[0]), roff(d[1]))
	}
	para(&b, `Do not edit them; override settings with systemctl --user edit mosaic-conv@.service.`)
	b.WriteString(".SH FILES\n")
	for _, d := range [][2]string{
		{"$XDG_CONFIG_HOME/mosaic/conversations/", "one TOML file per registered conversation: project, seat, workspace, session file, engine pin, model and limits (mosaicctl conv add, show, rm). $XDG_CONFIG_HOME defaults to ~/.config."},
		{"$XDG_STATE_HOME/mosaic/claims/", "the writer claims: write-once revisions that record which conversation holds a seat and a session, and the proofs that freed them. Never edit or remove them while a conversation runs. $XDG_STATE_HOME defaults to ~/.local/state."},
		{"$XDG_STATE_HOME/mosaic/pins/", "manifests of pinned engine package trees, checked before every launch."},
		{"$XDG_RUNTIME_DIR/mosaic/conv/ID.sock", "the conversation's control socket."},
	} {
		fmt.Fprintf(&b, ".TP\n.I %s\n%s\n", roff(d[0]), roff(d[1]))
	}
	para(&b, `Removing the package, even with purge, leaves these files alone: they belong to each user.`)
	exitSection(&b)
	seeAlso(&b, "mosaicctl(1)", "systemd.socket(5)", "systemd.service(5)", "systemd.scope(5)", "journalctl(1)")
	return b.String()
}
