package main

import (
	"io"
	"os"

	"github.com/mosaic-agents/mosaic/proofs"
	"github.com/mosaic-agents/mosaic/protocol"
	"github.com/urfave/cli/v2"
)

func proofCommand() *cli.Command {
	return &cli.Command{
		Name:  "proof",
		Usage: "work with stop proofs",
		Subcommands: []*cli.Command{{
			Name:      "verify",
			Usage:     "re-check a cohort or boot proof offline and print every check",
			ArgsUsage: "FILE|-",
			Action: func(c *cli.Context) error {
				if c.NArg() != 1 {
					return usageError("`mosaicctl proof verify` wants one proof file, or - for standard input, got %d arguments", c.NArg())
				}
				var r io.Reader = os.Stdin
				if name := c.Args().First(); name != "-" {
					f, err := os.Open(name)
					if err != nil {
						r := protocol.Wrap(protocol.CodeProofFile, err, "")
						r.Message += "; name the file `mosaicctl stop --proof FILE` wrote, or - to read the proof from standard input"
						return r
					}
					defer f.Close()
					r = f
				}
				return proofs.VerifyReader(r, os.Stdout)
			},
		}},
	}
}
