package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/mosaic-agents/mosaic/units"
	"github.com/urfave/cli/v2"
)

// genCommand writes what a package ships beside the binary, from the same
// definitions the binary runs: the user units (units/templates, the
// templates `install` renders), the man pages and the shell completions
// (this command tree). Hidden: it is for `make deb` (packaging/build.sh),
// not for users, and generating from the binary itself means a page or a
// completion can never name a flag the binary lacks.
func genCommand() *cli.Command {
	return &cli.Command{
		Name:   "gen",
		Hidden: true,
		Usage:  "write the packaged units, man pages and completions",
		Subcommands: []*cli.Command{
			{
				Name:      "units",
				Usage:     "render the user units for the binary at --bin into DIR, for a package (as for a machine with IPv6)",
				ArgsUsage: "DIR",
				Flags: []cli.Flag{
					&cli.StringFlag{Name: "bin", Value: "/usr/bin/mosaicctl", Usage: "the absolute `PATH` ExecStart= runs"},
				},
				Action: func(c *cli.Context) error {
					dir, err := dirArg(c)
					if err != nil {
						return err
					}
					files, err := units.RenderPackaged(c.String("bin"))
					if err != nil {
						return err
					}
					return writeFiles(dir, files)
				},
			},
			{
				Name:      "man",
				Usage:     "write mosaicctl(1), one page per command and mosaic-conv@.service(5) into DIR",
				ArgsUsage: "DIR",
				Action: func(c *cli.Context) error {
					dir, err := dirArg(c)
					if err != nil {
						return err
					}
					return writeFiles(dir, manPages(newApp()))
				},
			},
			{
				Name:      "completion",
				Usage:     "print the completion script for SHELL (bash, zsh or fish)",
				ArgsUsage: "SHELL",
				Action: func(c *cli.Context) error {
					if c.NArg() != 1 {
						return usageError("`mosaicctl gen completion` wants one shell: bash, zsh or fish")
					}
					script, err := completion(newApp(), c.Args().First())
					if err != nil {
						return err
					}
					_, err = os.Stdout.WriteString(script)
					return err
				},
			},
		},
	}
}

func dirArg(c *cli.Context) (string, error) {
	if c.NArg() != 1 {
		return "", usageError("`%s` wants one directory", c.Command.HelpName)
	}
	return c.Args().First(), nil
}

// writeFiles writes files into dir (created if missing), 0644.
func writeFiles(dir string, files []units.File) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("gen: %w", err)
	}
	for _, f := range files {
		if err := os.WriteFile(filepath.Join(dir, f.Name), f.Data, 0o644); err != nil {
			return fmt.Errorf("gen: %w", err)
		}
	}
	return nil
}

// visible is cmds without the hidden ones and urfave/cli's own help.
func visible(cmds []*cli.Command) []*cli.Command {
	var out []*cli.Command
	for _, c := range cmds {
		if !c.Hidden && c.Name != "help" {
			out = append(out, c)
		}
	}
	return out
}

// flagDoc is one flag as pages and completions show it.
type flagDoc struct {
	names []string // without dashes, long first as defined
	arg   string   // the value's placeholder; "" for a switch
	usage string
}

// flagDocs describes fs the way urfave/cli's help does: the first
// back-quoted word of the usage names the value.
func flagDocs(fs []cli.Flag) []flagDoc {
	var out []flagDoc
	for _, f := range fs {
		d := flagDoc{names: f.Names()}
		takes := false
		if df, ok := f.(cli.DocGenerationFlag); ok {
			d.usage = df.GetUsage()
			takes = df.TakesValue()
		}
		name, usage := placeholder(d.usage)
		d.usage = usage
		if takes {
			d.arg = name
			if d.arg == "" {
				d.arg = "VALUE"
			}
		}
		out = append(out, d)
	}
	return out
}

// placeholder splits usage as urfave/cli does: `NAME` is the value's name
// and stays in the text without its quotes.
func placeholder(usage string) (name, text string) {
	i := strings.IndexByte(usage, '`')
	if i < 0 {
		return "", usage
	}
	j := strings.IndexByte(usage[i+1:], '`')
	if j < 0 {
		return "", usage
	}
	name = usage[i+1 : i+1+j]
	return name, usage[:i] + name + usage[i+2+j:]
}

// takesID reports whether cmd's first argument is a conversation id.
func takesID(cmd *cli.Command) bool {
	a := strings.TrimPrefix(cmd.ArgsUsage, "[")
	return a == "ID" || strings.HasPrefix(a, "ID ") || strings.HasPrefix(a, "ID]")
}
