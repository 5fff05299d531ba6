package main

import (
	"fmt"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/mosaic-agents/mosaic/engine"
	"github.com/mosaic-agents/mosaic/engine/pi"
)

// The completions share one shape in every shell: a table with, for each
// command path ("mosaicctl", "mosaicctl conv", "mosaicctl conv show"), its
// subcommands, its flags, the flags that take a value and whether its
// first argument is a conversation id; and one walker that reads the
// words typed so far through that table (a value flag swallows the next
// word, as argv.go's reordering does). Ids come from `mosaicctl conv list`
// at completion time. urfave/cli's own completion asks the binary on every
// tab and knows no value flags; a table keeps the shell fast and honest
// about what takes a value. `queue` has both: its first argument is an id
// or one of its acting forms, which the table lists as its subcommands.

// compNode is one command path of the table.
type compNode struct {
	path  string
	subs  []*cli.Command
	flags []flagDoc
	id    bool
	args  string // what its other positional words complete to (compArgs)
}

// compFiles, as a node's args or a flag's values, completes file names;
// any other string is the words to offer, and "" offers nothing: a
// DURATION, a NAME or a HOST:PORT is no file.
const compFiles = "@files"

// flagChoices are the values of the flags that take one of a few words.
var flagChoices = map[string][]string{
	"thinking":    pi.ThinkingLevels,
	"engine-kind": {engine.KindPi, engine.KindClaude},
}

// compValues is what the value of f completes to.
func compValues(f flagDoc) string {
	if c, ok := flagChoices[f.names[0]]; ok {
		return strings.Join(c, " ")
	}
	switch f.arg {
	case "FILE", "DIR", "PATH", "pi":
		return compFiles
	}
	return ""
}

// compArgs is what the positional words of c complete to, after an id
// where it takes one: file names where they are a FILE or a DIR, the
// shells for a SHELL.
func compArgs(c *cli.Command) string {
	a := c.ArgsUsage
	switch {
	case strings.Contains(a, "FILE") || strings.Contains(a, "DIR"):
		return compFiles
	case strings.Contains(a, "SHELL"):
		return "bash zsh fish"
	}
	return ""
}

func compTable(app *cli.App) []compNode {
	help := flagDoc{names: []string{"help", "h"}, usage: "show help"}
	root := compNode{path: "mosaicctl", subs: visible(app.Commands),
		flags: []flagDoc{help, {names: []string{"version", "v"}, usage: "print the version"}}}
	// help's argument is a command.
	helpCmd := &cli.Command{Name: "help", Usage: "show the help of a command"}
	root.subs = append(root.subs, helpCmd)
	out := []compNode{root, {path: "mosaicctl help", flags: []flagDoc{help}, args: compNode{subs: visible(app.Commands)}.subWords()}}
	var walk func(prefix string, cmds []*cli.Command)
	walk = func(prefix string, cmds []*cli.Command) {
		for _, c := range cmds {
			if c == helpCmd {
				continue
			}
			n := compNode{path: prefix + " " + c.Name, subs: visible(c.Subcommands),
				flags: append(flagDocs(c.Flags), help), id: takesID(c), args: compArgs(c)}
			if n.path == "mosaicctl queue" {
				// queue's acting forms are its first argument, not
				// subcommands; each takes the id next and queue's flags.
				for _, verb := range queueSubVerbs {
					n.subs = append(n.subs, &cli.Command{Name: verb, Usage: queueFormUsage[verb], Flags: c.Flags, ArgsUsage: "ID"})
				}
			}
			out = append(out, n)
			walk(n.path, n.subs)
		}
	}
	walk("mosaicctl", root.subs)
	return out
}

func (n compNode) flagWords(valueOnly bool) string {
	var w []string
	for _, f := range n.flags {
		if valueOnly && f.arg == "" {
			continue
		}
		for _, name := range f.names {
			w = append(w, dashed(name))
		}
	}
	return strings.Join(w, " ")
}

// dashed is a flag's name as typed: -h, --help.
func dashed(name string) string {
	if len(name) == 1 {
		return "-" + name
	}
	return "--" + name
}

// flagValues lists, for each of n's value flags by each of its names,
// what its value completes to.
func (n compNode) flagValues() [][2]string {
	var out [][2]string
	for _, f := range n.flags {
		if f.arg == "" {
			continue
		}
		for _, name := range f.names {
			out = append(out, [2]string{dashed(name), compValues(f)})
		}
	}
	return out
}

func (n compNode) subWords() string {
	var w []string
	for _, s := range n.subs {
		w = append(w, s.Name)
	}
	return strings.Join(w, " ")
}

// completion returns the script for shell.
func completion(app *cli.App, shell string) (string, error) {
	t := compTable(app)
	switch shell {
	case "bash":
		return bashCompletion(t), nil
	case "zsh":
		return zshCompletion(t), nil
	case "fish":
		return fishCompletion(t), nil
	}
	return "", usageError("no completion for shell %q: bash, zsh or fish", shell)
}

// shellTables writes the table as one assignment per entry.
func shellTables(b *strings.Builder, t []compNode, line func(table, key, value string) string) {
	for _, n := range t {
		for _, kv := range [][2]string{{"subs", n.subWords()}, {"flags", n.flagWords(false)}, {"vflags", n.flagWords(true)}} {
			if kv[1] != "" {
				b.WriteString(line(kv[0], n.path, kv[1]))
			}
		}
		if n.id {
			b.WriteString(line("id", n.path, "1"))
		}
		if n.args != "" {
			b.WriteString(line("args", n.path, n.args))
		}
		for _, fv := range n.flagValues() {
			if fv[1] != "" {
				b.WriteString(line("vals", n.path+" "+fv[0], fv[1]))
			}
		}
	}
}

// shellWalk is the walker of bash and zsh (the same syntax): it reads
// words[first..cword-1] into p (the command path), npos (positionals after
// it), skip (the current word is a flag's value) and vf (that flag), from
// the tables named prefix+"subs" and prefix+"vflags".
func shellWalk(words, cword string, first int, prefix string) string {
	return strings.NewReplacer("WORDS", words, "CWORD", cword, "FIRST", fmt.Sprint(first), "T_", prefix).Replace(
		`	local p=mosaicctl w i npos=0 skip=0 vf= cur=${WORDS[CWORD]}
	for ((i = FIRST; i < CWORD; i++)); do
		w=${WORDS[i]}
		# bash splits --flag=value into three words: the value follows "=".
		if [[ $w == = ]]; then skip=1; continue; fi
		if ((skip)); then skip=0; continue; fi
		if [[ $w == -* ]]; then
			[[ $w != *=* && " ${T_vflags[$p]} " == *" $w "* ]] && skip=1 vf=$w
			continue
		fi
		if ((npos == 0)) && [[ " ${T_subs[$p]} " == *" $w "* ]]; then
			p="$p $w"
			continue
		fi
		((npos++))
	done
`)
}

const idsCommand = `mosaicctl conv list 2>/dev/null | awk 'NR > 1 { print $1 }'`

func bashCompletion(t []compNode) string {
	var b strings.Builder
	b.WriteString("# bash completion for mosaicctl; generated by `mosaicctl gen completion bash`.\n")
	b.WriteString("declare -gA _mosaicctl_subs _mosaicctl_flags _mosaicctl_vflags _mosaicctl_id _mosaicctl_args _mosaicctl_vals\n")
	shellTables(&b, t, func(table, key, value string) string {
		return fmt.Sprintf("_mosaicctl_%s[%q]=%q\n", table, key, value)
	})
	b.WriteString(`
_mosaicctl() {
` + shellWalk("COMP_WORDS", "COMP_CWORD", 1, "_mosaicctl_") + `	COMPREPLY=()
	if ((skip)); then
		_mosaicctl_offer "${_mosaicctl_vals[$p $vf]}"
	elif [[ $cur == -* ]]; then
		COMPREPLY=($(compgen -W "${_mosaicctl_flags[$p]}" -- "$cur"))
	elif [[ -n ${_mosaicctl_subs[$p]} ]] && ((npos == 0)); then
		COMPREPLY=($(compgen -W "${_mosaicctl_subs[$p]}" -- "$cur"))
		if [[ -n ${_mosaicctl_id[$p]} ]]; then
			COMPREPLY+=($(compgen -W "$(` + idsCommand + `)" -- "$cur"))
		fi
	elif [[ -n ${_mosaicctl_id[$p]} ]] && ((npos == 0)); then
		COMPREPLY=($(compgen -W "$(` + idsCommand + `)" -- "$cur"))
	else
		_mosaicctl_offer "${_mosaicctl_args[$p]}"
	fi
}

# _mosaicctl_offer WORDS: file names for ` + compFiles + `, else the words.
_mosaicctl_offer() {
	if [[ $1 == ` + compFiles + ` ]]; then
		# One name a line, spaces and all (no word splitting, no glob);
		# filenames has readline quote them and end a directory in a
		# slash instead of a space, so a path completes level by level.
		compopt -o filenames 2>/dev/null
		mapfile -t COMPREPLY < <(compgen -f -- "$cur")
	elif [[ -n $1 ]]; then
		COMPREPLY=($(compgen -W "$1" -- "$cur"))
	fi
}
complete -F _mosaicctl mosaicctl
`)
	return b.String()
}

func zshCompletion(t []compNode) string {
	var b strings.Builder
	b.WriteString("#compdef mosaicctl\n# zsh completion for mosaicctl; generated by `mosaicctl gen completion zsh`.\n\n")
	b.WriteString("_mosaicctl() {\n\ttypeset -A subs flags vflags id args vals\n")
	shellTables(&b, t, func(table, key, value string) string {
		return fmt.Sprintf("\t%s+=(%s %s)\n", table, zq(key), zq(value))
	})
	b.WriteString(`` + shellWalk("words", "CURRENT", 2, "") + `	local offer
	if ((skip)); then
		offer=${vals[$p $vf]}
	elif [[ $cur == -* ]]; then
		compadd -- ${=flags[$p]}
	elif [[ -n ${subs[$p]} ]] && ((npos == 0)); then
		compadd -- ${=subs[$p]}
		if [[ -n ${id[$p]} ]]; then
			compadd -- ${(f)"$(` + idsCommand + `)"}
		fi
	elif [[ -n ${id[$p]} ]] && ((npos == 0)); then
		compadd -- ${(f)"$(` + idsCommand + `)"}
	else
		offer=${args[$p]}
	fi
	if [[ $offer == ` + compFiles + ` ]]; then
		_files
	elif [[ -n $offer ]]; then
		compadd -- ${=offer}
	fi
}

if [[ $funcstack[1] == _mosaicctl ]]; then
	_mosaicctl "$@"
else
	compdef _mosaicctl mosaicctl
fi
`)
	return b.String()
}

// zq quotes s for zsh and fish in single quotes.
func zq(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

func fishCompletion(t []compNode) string {
	var b strings.Builder
	b.WriteString("# fish completion for mosaicctl; generated by `mosaicctl gen completion fish`.\n\n")
	for _, table := range []string{"subs", "vflags"} {
		fmt.Fprintf(&b, "function __mosaicctl_%s\n\tswitch $argv[1]\n", table)
		for _, n := range t {
			w := n.subWords()
			if table == "vflags" {
				w = n.flagWords(true)
			}
			if w != "" {
				fmt.Fprintf(&b, "\t\tcase %s\n\t\t\tstring split -- ' ' %s\n", zq(n.path), zq(w))
			}
		}
		b.WriteString("\tend\nend\n\n")
	}
	b.WriteString(`# __mosaicctl_where prints the command path typed so far and how many
# positional words follow it.
function __mosaicctl_where
	set -l toks (commandline -opc)
	set -l p mosaicctl
	set -l npos 0
	set -l skip 0
	for w in $toks[2..-1]
		if test $skip = 1
			set skip 0
			continue
		end
		if string match -q -- '-*' $w
			if not string match -q -- '*=*' $w; and contains -- $w (__mosaicctl_vflags $p)
				set skip 1
			end
			continue
		end
		if test $npos = 0; and contains -- $w (__mosaicctl_subs $p)
			set p "$p $w"
			continue
		end
		set npos (math $npos + 1)
	end
	echo $p
	echo $npos
end

# __mosaicctl_at PATH [N]: the path typed is PATH (and N positionals follow).
function __mosaicctl_at
	set -l w (__mosaicctl_where)
	test "$w[1]" = "$argv[1]"; or return 1
	test (count $argv) -lt 2; or test "$w[2]" = "$argv[2]"
end

function __mosaicctl_ids
	` + idsCommand + `
end

complete -c mosaicctl -f
`)
	for _, n := range t {
		p := zq(n.path)
		for _, s := range n.subs {
			fmt.Fprintf(&b, "complete -c mosaicctl -n \"__mosaicctl_at %s 0\" -a %s -d %s\n", p, zq(s.Name), zq(s.Usage))
		}
		for _, f := range n.flags {
			var opts []string
			for _, name := range f.names {
				if len(name) == 1 {
					opts = append(opts, "-s "+name)
				} else {
					opts = append(opts, "-l "+name)
				}
			}
			switch v := compValues(f); {
			case f.arg == "":
			case v == compFiles:
				opts = append(opts, "-r -F")
			case v != "":
				opts = append(opts, "-x -a "+zq(v))
			default:
				opts = append(opts, "-x")
			}
			fmt.Fprintf(&b, "complete -c mosaicctl -n \"__mosaicctl_at %s\" %s -d %s\n", p, strings.Join(opts, " "), zq(f.usage))
		}
		if n.id {
			fmt.Fprintf(&b, "complete -c mosaicctl -n \"__mosaicctl_at %s 0\" -a '(__mosaicctl_ids)' -d conversation\n", p)
		}
		switch {
		case n.args == compFiles:
			fmt.Fprintf(&b, "complete -c mosaicctl -n \"__mosaicctl_at %s\" -F\n", p)
		case n.args != "":
			fmt.Fprintf(&b, "complete -c mosaicctl -n \"__mosaicctl_at %s\" -a %s\n", p, zq(n.args))
		}
	}
	return b.String()
}
