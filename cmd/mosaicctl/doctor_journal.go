package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// persistentJournal is where journald keeps the journal on disk; with
// Storage=auto (the default) its existence decides.
const persistentJournal = "/var/log/journal"

// checkJournal: the audit trail is the user's own journal files. journald
// splits them per user (SplitMode=uid) only on persistent storage; on
// volatile storage every entry goes to one system file in /run that only
// root and the systemd-journal and adm groups read, and a reboot loses it.
func checkJournal(ctx context.Context) (string, error) {
	conf, err := journaldConf(ctx)
	if err != nil {
		return "", warnf("", "cannot read journald's configuration (%v); the audit trail may not be kept", err)
	}
	_, statErr := os.Stat(persistentJournal)
	uf, err := userJournal()
	if err != nil {
		return "", err
	}
	return judgeJournal(conf, statErr, uf)
}

// judgeJournal decides the journal check from journald's settings,
// whether /var/log/journal could be stat'ed, and the user's file.
func judgeJournal(conf map[string]string, statErr error, uf string) (string, error) {
	storage, split := conf["Storage"], conf["SplitMode"]
	if storage == "" {
		storage = "auto"
	}
	if split == "" {
		split = "uid"
	}
	switch {
	case storage == "none":
		return "", failf("", "journald has Storage=none: it discards every entry, so mosaic's audit of decisions and refusals is lost")
	case storage == "volatile", storage == "auto" && statErr != nil:
		return "", warnf("", "the journal is volatile (Storage=%s, %s %s): audit entries are lost at reboot and "+
			"`journalctl --user` shows them to members of systemd-journal only", storage, persistentJournal, existence(statErr))
	case split != "uid":
		return "", warnf("set SplitMode=uid (the default) in a journald.conf.d drop-in",
			"journald has SplitMode=%s: user entries go to the system journal, which `journalctl --user` shows to members of systemd-journal only", split)
	}
	f, err := os.Open(uf)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return "", warnf("none needed if your user manager just started: journald writes the file with your first entry; "+
			"uids below 1000 log to the system journal", "no user journal file %s yet", uf)
	case err != nil:
		return "", failf("journald grants each user read access to their file (an ACL); check `getfacl "+uf+"`",
			"user journal file %s is not readable: %v", uf, err)
	}
	f.Close()
	return fmt.Sprintf("persistent (Storage=%s, SplitMode=%s); %s readable: `journalctl --user -x -u mosaic-conv@ID` shows the audit",
		storage, split, uf), nil
}

func existence(err error) string {
	if err == nil {
		return "exists"
	}
	if errors.Is(err, fs.ErrNotExist) {
		return "absent"
	}
	return "unreadable: " + err.Error()
}

// userJournal is this user's journal file: journald names it after the
// uid, under the machine id.
func userJournal() (string, error) {
	b, err := os.ReadFile("/etc/machine-id")
	if err != nil {
		return "", fmt.Errorf("read the machine id: %w", err)
	}
	mid := strings.TrimSpace(string(b))
	return filepath.Join(persistentJournal, mid, fmt.Sprintf("user-%d.journal", os.Getuid())), nil
}

// journaldConf reads journald's [Journal] settings as systemd merges them
// (main file, then drop-ins in /etc, /run and /usr/lib by name):
// `systemd-analyze cat-config` prints them in that order, so the last
// value of a key wins.
func journaldConf(ctx context.Context) (map[string]string, error) {
	var out, errb bytes.Buffer
	cmd := exec.CommandContext(ctx, "systemd-analyze", "cat-config", "systemd/journald.conf")
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("systemd-analyze cat-config systemd/journald.conf: %w: %s", err, strings.TrimSpace(errb.String()))
	}
	return parseJournalSection(out.Bytes()), nil
}

// parseJournalSection returns the last value of each key of the [Journal]
// sections of a merged configuration.
func parseJournalSection(b []byte) map[string]string {
	conf := map[string]string{}
	in := false
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		switch {
		case line == "" || line[0] == '#' || line[0] == ';':
		case line[0] == '[':
			in = line == "[Journal]"
		case in:
			if k, v, ok := strings.Cut(line, "="); ok {
				conf[strings.TrimSpace(k)] = strings.TrimSpace(v)
			}
		}
	}
	return conf
}
