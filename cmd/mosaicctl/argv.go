package main

import (
	"fmt"
	"strings"

	"github.com/urfave/cli/v2"
)

// Flags after positional arguments (`mosaicctl prompt ID --take TEXT`) are
// moved in front of them before urfave/cli v2 parses, because v2 stops at
// the first positional, as Go's flag package does. The step is driven by
// each command's own flag definitions, so it knows which flags take a
// value (the word after `--timeout` is its value, not a positional) and
// never guesses. `--` ends flag parsing: everything after it is
// positional, so a prompt may start with `-`. urfave/cli v3 parses
// interspersed flags itself, but moving to it rewrites every command
// definition; this step keeps them as they are (docs/cli.md).

// interspersed returns argv with each leaf command's flags first and its
// positional arguments after a `--`. It refuses an unknown command name,
// naming it; `help` and everything after it are left to urfave/cli.
func interspersed(app *cli.App, argv []string) ([]string, error) {
	if len(argv) == 0 {
		return argv, nil
	}
	out := []string{argv[0]}
	cmds, path, flags := app.Commands, "mosaicctl", app.Flags
	i := 1
	for {
		// Flags of an intermediate level (--help, --version, `web --addr
		// A`) stay where they are, each with its value when its
		// definition takes one: the value is not a subcommand's name.
		for i < len(argv) && strings.HasPrefix(argv[i], "-") && argv[i] != "-" && argv[i] != "--" {
			out = append(out, argv[i])
			if !strings.Contains(argv[i], "=") && takesValue(flags, strings.TrimLeft(argv[i], "-")) && i+1 < len(argv) {
				i++
				out = append(out, argv[i])
			}
			i++
		}
		if i >= len(argv) || argv[i] == "help" || argv[i] == "h" || argv[i] == "--" {
			return append(out, argv[i:]...), nil
		}
		cmd := findCommand(cmds, argv[i])
		if cmd == nil {
			if n := nearest(cmds, argv[i]); n != "" {
				return nil, usageError("unknown command %q (did you mean %q?); see `%s --help`", argv[i], n, path)
			}
			return nil, usageError("unknown command %q; see `%s --help`", argv[i], path)
		}
		out = append(out, argv[i])
		path += " " + cmd.Name
		i++
		if len(cmd.Subcommands) == 0 {
			rest, err := reorder(cmd.Flags, argv[i:])
			if err != nil {
				return nil, usageError("%v; see `%s --help`", err, path)
			}
			return append(out, rest...), nil
		}
		cmds, flags = cmd.Subcommands, cmd.Flags
	}
}

// reorder puts the flags of args first, each with its value when its
// definition takes one, then `--` and the positional arguments, in their
// order. A flag this command does not define is passed on for urfave/cli
// to refuse by name. A flag that takes a value and is given none (the
// last word, or right before `--`) is refused here: moved in front of the
// `--` this step adds, it would take that `--` as its value (a proof
// written to a file named `--`).
func reorder(flags []cli.Flag, args []string) ([]string, error) {
	var fs, pos []string
	for j := 0; j < len(args); j++ {
		a := args[j]
		switch {
		case a == "--":
			pos = append(pos, args[j+1:]...)
			j = len(args)
		case a == "-" || !strings.HasPrefix(a, "-"):
			pos = append(pos, a)
		default:
			fs = append(fs, a)
			if strings.Contains(a, "=") || !takesValue(flags, strings.TrimLeft(a, "-")) {
				continue
			}
			if j+1 == len(args) || args[j+1] == "--" {
				return nil, fmt.Errorf("flag %s needs a value", a)
			}
			fs = append(fs, args[j+1])
			j++
		}
	}
	if len(pos) > 0 {
		fs = append(append(fs, "--"), pos...)
	}
	return fs, nil
}

// takesValue reports whether the flag called name is defined and takes a
// value (`--timeout 5s`); a bool flag takes none (`--take`).
func takesValue(flags []cli.Flag, name string) bool {
	for _, f := range flags {
		for _, n := range f.Names() {
			if n != name {
				continue
			}
			v, ok := f.(interface{ TakesValue() bool })
			return ok && v.TakesValue()
		}
	}
	return false
}

func findCommand(cmds []*cli.Command, name string) *cli.Command {
	for _, c := range cmds {
		if c.HasName(name) {
			return c
		}
	}
	return nil
}
