package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"time"

	"github.com/mosaic-agents/mosaic/claims"
	"github.com/mosaic-agents/mosaic/conversations"
	"github.com/mosaic-agents/mosaic/proofs"
	"github.com/mosaic-agents/mosaic/protocol"
	"github.com/mosaic-agents/mosaic/terminal"
	"github.com/mosaic-agents/mosaic/units"
	"github.com/urfave/cli/v2"
)

func auditCommand() *cli.Command {
	return &cli.Command{
		Name:      "audit",
		Usage:     "print a conversation's decisions from the journal, re-verify every proof there and cross-check the claim store's proofs against it",
		ArgsUsage: "ID",
		Description: "Exit 0: every proof in the claim store is in the journal and verifies, and journald dropped nothing.\n" +
			"Exit 4 (code first on stderr): audit-unverified, audit-gap (a stored proof is missing from the journal),\n" +
			"audit-suppressed (journald's rate limit dropped messages), audit-store (claim keys unreadable).",
		Flags: []cli.Flag{
			&cli.BoolFlag{Name: "json", Usage: "print the journal entries as JSON lines"},
			&cli.StringFlag{Name: "claim-root", Usage: "the claim store `DIR` (default $XDG_STATE_HOME/mosaic/claims)"},
		},
		Action: func(c *cli.Context) error {
			id, err := idArg(c)
			if err != nil {
				return err
			}
			err = runAudit(c, id)
			var v *verdict
			if errors.As(err, &v) {
				fmt.Fprintf(os.Stderr, "mosaicctl: %s\n", v.Error())
				os.Exit(v.status)
			}
			return err
		},
	}
}

func runAudit(c *cli.Context, id string) error {
	ctx := c.Context
	service, uid := units.ServiceUnit(id), os.Getuid()
	entries, err := conversationEntries(ctx, id, service, uid)
	if err != nil {
		return fmt.Errorf("read the journal: %w", err)
	}
	stored, storeErr := storedProofs(ctx, c.String("claim-root"), id)
	if err := auditable(id, len(entries) > 0 || len(stored) > 0 || storeErr != nil); err != nil {
		return err
	}
	r := &auditReport{entries: len(entries), storeProblem: storeErr}
	journaled := map[string][]byte{}
	failed := map[string]bool{}
	var since time.Time
	for _, e := range entries {
		if t := entryTime(e); !t.IsZero() && (since.IsZero() || t.Before(since)) {
			since = t
		}
		printEntry(c.Bool("json"), e)
		digest := e["MOSAIC_PROOF_DIGEST"]
		if e["MOSAIC_EVENT"] != "proof" || digest == "" {
			continue
		}
		r.journaled++
		raw := e["MOSAIC_PROOF"]
		if raw == "" { // left out as too large: the store's copy is checked
			if _, ok := journaled[digest]; !ok {
				journaled[digest] = nil
			}
			fmt.Printf("  proof %s: journaled without its body (%s bytes); checked against the claim store\n", digest, e["MOSAIC_PROOF_OMITTED"])
			continue
		}
		if err := checkJournaledProof([]byte(raw), digest); err != nil {
			r.failed++
			failed[digest] = true
			fmt.Printf("  proof %s: FAILED: %v\n", digest, err)
			continue
		}
		journaled[digest] = []byte(raw)
		fmt.Printf("  proof %s: verified (digest, membership, deaths, empty cgroup)\n", digest)
	}

	for _, rev := range stored {
		r.stored = append(r.stored, storedProof{rev: rev})
		if !rev.Written.IsZero() && (since.IsZero() || rev.Written.Before(since)) {
			since = rev.Written
		}
	}
	crossCheck(r, journaled, failed)
	r.suppressed, r.noticesRead, err = suppressions(ctx, since, service, uid)
	if err != nil {
		return fmt.Errorf("read journald's suppression notices: %w", err)
	}
	printCrossCheck(r)
	return r.verdict(id)
}

// auditable refuses an id that names nothing to audit: not registered,
// and nothing of it in the journal or the claim store (held false), so a
// typo is not reported as a clean, empty audit. A conversation removed with
// `conv rm` keeps its journal entries and stored proofs, and auditing them
// is how its stops are still proven afterwards, so an unregistered id that
// holds any is audited, with a note on stderr (stdout may be --json).
// Registration is read only to tell those apart: a file that does not load
// is still a registered conversation with a history to audit.
func auditable(id string, held bool) error {
	s, err := conversations.Open()
	if err != nil {
		return nil
	}
	if _, err := s.Load(id); protocol.CodeOf(err) != protocol.CodeUnknownConv {
		return nil
	}
	if !held {
		return protocol.Refuse(protocol.CodeUnknownConv,
			"no conversation %s: it is not registered and neither the journal nor the claim store holds anything of it; see `mosaicctl conv list`", id)
	}
	fmt.Fprintf(os.Stderr, "mosaicctl: %s is not registered (removed with `mosaicctl conv rm`?); auditing what the journal and the claim store still hold of it\n", id)
	return nil
}

// storedProofs reads the claim store's proofs of the conversation; a store
// that does not exist yet holds none.
func storedProofs(ctx context.Context, root, id string) ([]claims.ProofRevision, error) {
	if root == "" {
		r, err := claims.DefaultRoot()
		if err != nil {
			return nil, err
		}
		root = r
	}
	if _, err := os.Stat(root); errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	store, err := claims.Open(root)
	if err != nil {
		return nil, err
	}
	return store.Proofs(ctx, id)
}

func printEntry(asJSON bool, e journalEntry) {
	if asJSON {
		b, _ := json.Marshal(e)
		fmt.Println(string(b))
		return
	}
	fmt.Printf("%-13s %-12s %s\n", e["MOSAIC_EVENT"], terminal.SanitizeLine(e["MOSAIC_CONNECTION"]), terminal.SanitizeLine(e["MESSAGE"]))
}

func printCrossCheck(r *auditReport) {
	stored, withdrawn := r.storedKinds()
	fmt.Printf("claim store: %d proof(s)%s of this conversation\n", stored, withdrawnSummary(withdrawn))
	for _, sp := range r.stored {
		pr := sp.rev.Proof
		what := fmt.Sprintf("  stored proof %s (%s, execution %s, claim %s revision %d)", pr.Digest, pr.Type, sp.rev.Execution, sp.rev.Claim, sp.rev.Seq)
		switch {
		case sp.withdrawn != "" && sp.err == nil:
			fmt.Printf("%s: %s\n", what, terminal.SanitizeLine(sp.withdrawn))
		case sp.exempt && sp.err == nil:
			fmt.Printf("%s: no engine ran; not journaled\n", what)
		case sp.exempt:
			// Never journaled, so never "missing": it is checked against
			// its claim revision, and that check failed.
			fmt.Printf("%s: FAILED against its claim revision: %v\n", what, sp.err)
		case !sp.journaled:
			fmt.Printf("%s: MISSING from the journal\n", what)
		case sp.err != nil:
			fmt.Printf("%s: in the journal, FAILED: %v\n", what, sp.err)
		default:
			fmt.Printf("%s: in the journal, verified\n", what)
		}
	}
	for _, d := range r.onlyJournal {
		fmt.Printf("  journaled proof %s: not in the claim store\n", d)
	}
	if r.storeProblem != nil {
		fmt.Printf("  claim store: %v\n", r.storeProblem)
	}
	for _, s := range r.suppressed {
		fmt.Printf("journald: suppressed %d messages from %s (notice at %s)\n", s.dropped, s.unit, s.at.UTC().Format(time.RFC3339))
	}
	if !r.noticesRead {
		fmt.Println("journald: suppression NOT CHECKED: its notices are in the system journal, which this user may not read (add the user to group systemd-journal or adm)")
	}
	fmt.Printf("%d journal entries, %d proofs, %d failed verification; %d proofs in the claim store%s, %d missing from the journal; %s\n",
		r.entries, r.journaled, r.failed, stored, withdrawnSummary(withdrawn), r.missing(), suppressionSummary(r))
}

// withdrawnSummary names the withdrawn launches beside the proofs, in
// the words of `status`: they are no cohort proofs.
func withdrawnSummary(n int) string {
	if n == 0 {
		return ""
	}
	return fmt.Sprintf(" and %d withdrawn launch(es) (no cohort proof)", n)
}

func suppressionSummary(r *auditReport) string {
	if !r.noticesRead {
		return "suppression not checked"
	}
	return fmt.Sprintf("journald suppressed %d messages", r.dropped())
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
