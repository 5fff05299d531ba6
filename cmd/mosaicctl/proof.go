package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/mosaic-agents/mosaic/conversations"
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
			Description: "Exit 0 when every check passes; 4 (code first on stderr) when the proof does not hold:\n" +
				"proof-malformed (not a cohort or boot proof at all) or proof-unverified (a check failed); 2 proof-file.",
			Action: func(c *cli.Context) error {
				if c.NArg() != 1 {
					return usageError("`mosaicctl proof verify` wants one proof file, or - for standard input, got %d arguments", c.NArg())
				}
				var r io.Reader = os.Stdin
				name := c.Args().First()
				if name != "-" {
					f, err := os.Open(name)
					if err != nil {
						r := protocol.Wrap(protocol.CodeProofFile, err, "")
						r.Message += "; name the file `mosaicctl stop --proof FILE` wrote, or - to read the proof from standard input"
						return r
					}
					defer f.Close()
					r = f
				}
				if v := proofVerdict(name, proofs.VerifyReader(r, os.Stdout)); v != nil {
					fmt.Fprintf(os.Stderr, "mosaicctl: %s: %s\n", v.code, v.message)
					os.Exit(v.status)
				}
				return nil
			},
		}},
	}
}

// Verdicts of `mosaicctl proof verify` (exit 4, done but not as asked: the
// proof was read and judged, and it proves nothing), as audit-unverified is
// for a journaled proof; a file that cannot be opened is refused
// proof-file (exit 2) before anything is judged.
const (
	codeProofMalformed  = "proof-malformed"  // the bytes are not a cohort or boot proof at all
	codeProofUnverified = "proof-unverified" // a proof whose checks failed
)

// proofVerdict turns VerifyReader's error into the verb's verdict, one
// line that names the fix; nil for a proof that holds, and for an error
// of reading, which main reports (exit 1: nothing was judged).
func proofVerdict(name string, err error) *verdict {
	var ve *proofs.VerifyError
	if err == nil || !errors.As(err, &ve) {
		return nil
	}
	what := name
	if name == "-" {
		what = "standard input"
	}
	if ve.Proof == nil {
		return unsettled(codeProofMalformed, "%s is not a cohort or boot proof: %v; give the file `mosaicctl stop --proof FILE` wrote, unchanged", what, oneLine(ve.Err))
	}
	failed := ve.Report.Failed()
	id := "ID"
	if cp, ok := ve.Proof.(*proofs.CohortProof); ok && conversations.ValidID(cp.Conversation) {
		id = cp.Conversation
	} else if bp, ok := ve.Proof.(*proofs.BootProof); ok && conversations.ValidID(bp.Conversation) {
		id = bp.Conversation
	}
	return unsettled(codeProofUnverified, "%s does not verify: %d of %d checks failed (%s; the FAIL lines on standard output say why), so it proves no stop; "+
		"re-check the copy the controller journaled with `mosaicctl audit %s`",
		what, len(failed), len(ve.Report.Checks), strings.Join(failed, ", "), id)
}

// oneLine keeps an error's message on one line of stderr.
func oneLine(err error) string {
	return strings.Join(strings.Fields(strings.ReplaceAll(err.Error(), "\n", "; ")), " ")
}
