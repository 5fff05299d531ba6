package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"regexp"
	"strconv"
	"time"
)

// journald's own MESSAGE_ID for "Suppressed N messages from UNIT"
// (SD_MESSAGE_JOURNAL_DROPPED), written when a rate-limit interval that
// dropped messages is over and the same unit logs again.
const journalDroppedID = "a596d6fe7bfa4994828e72309e95d61e"

var suppressedText = regexp.MustCompile(`^Suppressed ([0-9]+) messages from (\S+)$`)

// journalEntry is one exported journal entry, its fields as strings.
type journalEntry map[string]string

// readJournal runs journalctl with args and -o json and decodes every
// line. journalctl reads the journal as the system administers it (split
// per user, rotated, access-controlled); parsing its JSON export keeps
// mosaicctl free of libsystemd. --all: without it the export gives a
// field longer than 4096 bytes as null, and a proof's body is journaled
// up to audit.MaxProof, so a proof of a few dozen members read as one
// left out.
func readJournal(ctx context.Context, args ...string) ([]journalEntry, []byte, error) {
	cmd := exec.CommandContext(ctx, "journalctl", append([]string{"-o", "json", "--all", "--no-pager", "-q"}, args...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, nil, fmt.Errorf("journalctl %v: %w: %s", args, err, bytes.TrimSpace(stderr.Bytes()))
	}
	var entries []journalEntry
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		var raw map[string]any
		if json.Unmarshal(sc.Bytes(), &raw) != nil {
			continue
		}
		e := journalEntry{}
		for k, v := range raw {
			e[k] = str(v)
		}
		entries = append(entries, e)
	}
	return entries, out, sc.Err()
}

// conversationEntries are the controller's own entries: written by a
// process of the conversation's service unit (journald sets
// _SYSTEMD_USER_UNIT and _UID from the sender's cgroup and credentials; no
// sender can choose them) and about this conversation. An entry the engine
// or anything else forges with MOSAIC_ fields is not one of them.
func conversationEntries(ctx context.Context, id, service string, uid int) ([]journalEntry, error) {
	entries, _, err := readJournal(ctx, "--user",
		"_SYSTEMD_USER_UNIT="+service, "_UID="+strconv.Itoa(uid), "MOSAIC_CONVERSATION="+id)
	return entries, err
}

// suppression is one journald notice that it dropped messages.
type suppression struct {
	at      time.Time
	dropped int
	unit    string
}

// suppressions reads journald's rate-limit notices since a time, for the
// units whose bucket the conversation's entries count against: on systemd
// 252 to 257 every unit of the user manager is counted as user@UID.service;
// other versions name the user unit after it, or the unit alone. The
// notices live in the system journal: a user who may not read it (not in
// systemd-journal or adm) gets readable=false, never "none found".
func suppressions(ctx context.Context, since time.Time, service string, uid int) (found []suppression, readable bool, err error) {
	probe, _, err := readJournal(ctx, "--system", "-n", "1")
	if err != nil || len(probe) == 0 {
		return nil, false, nil
	}
	args := []string{"_TRANSPORT=driver", "_UID=0", "MESSAGE_ID=" + journalDroppedID}
	if !since.IsZero() {
		args = append(args, "--since", "@"+strconv.FormatInt(since.Unix(), 10))
	}
	entries, _, err := readJournal(ctx, args...)
	if err != nil {
		return nil, true, err
	}
	mgr := fmt.Sprintf("user@%d.service", uid)
	for _, e := range entries {
		m := suppressedText.FindStringSubmatch(e["MESSAGE"])
		if m == nil {
			continue
		}
		if u := m[2]; u != mgr && u != mgr+"/"+service && u != service {
			continue
		}
		n, _ := strconv.Atoi(m[1])
		found = append(found, suppression{at: entryTime(e), dropped: n, unit: m[2]})
	}
	return found, true, nil
}

// entryTime is an entry's __REALTIME_TIMESTAMP (microseconds).
func entryTime(e journalEntry) time.Time {
	us, err := strconv.ParseInt(e["__REALTIME_TIMESTAMP"], 10, 64)
	if err != nil {
		return time.Time{}
	}
	return time.UnixMicro(us)
}
