package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"

	"github.com/mosaic-agents/mosaic/proofs"
	"github.com/urfave/cli/v2"
)

func auditCommand() *cli.Command {
	return &cli.Command{
		Name:      "audit",
		Usage:     "print a conversation's decisions from the journal and re-verify every proof found there",
		ArgsUsage: "ID",
		Flags: []cli.Flag{
			&cli.BoolFlag{Name: "json", Usage: "print the journal entries as JSON lines"},
		},
		Action: func(c *cli.Context) error {
			id, err := idArg(c)
			if err != nil {
				return err
			}
			// journalctl reads the journal as the system administers it
			// (split per user, rotated, access-controlled); parsing its
			// JSON export keeps mosaicctl free of libsystemd.
			out, err := exec.CommandContext(c.Context, "journalctl", "--user", "-o", "json", "--no-pager",
				"MOSAIC_CONVERSATION="+id).Output()
			if err != nil {
				return fmt.Errorf("read the journal (journalctl --user MOSAIC_CONVERSATION=%s): %w", id, err)
			}
			entries, proofsSeen, bad := 0, 0, 0
			sc := bufio.NewScanner(bytes.NewReader(out))
			sc.Buffer(make([]byte, 1<<20), 64<<20)
			for sc.Scan() {
				var e map[string]any
				if json.Unmarshal(sc.Bytes(), &e) != nil {
					continue
				}
				entries++
				if c.Bool("json") {
					fmt.Println(sc.Text())
				} else {
					fmt.Printf("%-13s %-12s %s\n", str(e["MOSAIC_EVENT"]), str(e["MOSAIC_CONNECTION"]), str(e["MESSAGE"]))
				}
				raw := str(e["MOSAIC_PROOF"])
				if raw == "" {
					continue
				}
				proofsSeen++
				if err := checkJournaledProof([]byte(raw), str(e["MOSAIC_PROOF_DIGEST"])); err != nil {
					bad++
					fmt.Printf("  proof %s: FAILED: %v\n", str(e["MOSAIC_PROOF_DIGEST"]), err)
				} else {
					fmt.Printf("  proof %s: verified (digest, membership, deaths, empty cgroup)\n", str(e["MOSAIC_PROOF_DIGEST"]))
				}
			}
			fmt.Fprintf(os.Stderr, "%d journal entries, %d proofs, %d failed verification\n", entries, proofsSeen, bad)
			if bad > 0 {
				return fmt.Errorf("%d proof(s) in the journal do not verify", bad)
			}
			return nil
		},
	}
}

// checkJournaledProof re-verifies a proof found in the journal and checks
// that it is the one its entry names.
func checkJournaledProof(raw []byte, digest string) error {
	_, rep, err := proofs.VerifyBytes(raw)
	if err != nil {
		return err
	}
	if err := rep.Err(); err != nil {
		return err
	}
	if rep.Digest != digest {
		return fmt.Errorf("the entry names digest %s, the proof's is %s", digest, rep.Digest)
	}
	return nil
}

// str renders a journal field; journalctl exports binary fields as
// arrays of bytes.
func str(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case []any:
		b := make([]byte, 0, len(x))
		for _, n := range x {
			if f, ok := n.(float64); ok {
				b = append(b, byte(f))
			}
		}
		return string(b)
	case nil:
		return ""
	default:
		return fmt.Sprint(x)
	}
}
