package controller

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"

	"golang.org/x/sys/unix"
)

// sessionHead is what the controller pins of a session file before launch:
// the header id (the native session identity) and the id of the last entry
// in file order (the leaf Pi loads, session-manager.js _buildIndex).
type sessionHead struct {
	exists bool
	id     string
	leaf   string
	ids    map[string]bool // every entry id in the file
}

// readSessionHead reads the session file read-only (O_NOFOLLOW: a symlink
// swapped in is refused). A missing file is a new conversation.
func readSessionHead(path string) (sessionHead, error) {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return sessionHead{ids: map[string]bool{}}, nil
	}
	if err != nil {
		return sessionHead{}, fmt.Errorf("open session %q: %w", path, err)
	}
	f := os.NewFile(uintptr(fd), path)
	defer f.Close()
	fi, err := f.Stat()
	if err != nil || !fi.Mode().IsRegular() {
		return sessionHead{}, fmt.Errorf("session %q is not a regular file", path)
	}
	h := sessionHead{exists: true, ids: map[string]bool{}}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 64<<20)
	first := true
	for sc.Scan() {
		var e struct {
			Type string `json:"type"`
			ID   string `json:"id"`
		}
		if json.Unmarshal(sc.Bytes(), &e) != nil {
			first = false
			continue // a malformed line is not an entry
		}
		if first {
			first = false
			if e.Type != "session" {
				return sessionHead{}, fmt.Errorf("session %q: line 1 is not a Pi session header", path)
			}
			h.id = e.ID
			continue
		}
		if e.ID != "" {
			h.ids[e.ID] = true
			h.leaf = e.ID
		}
	}
	if err := sc.Err(); err != nil {
		return sessionHead{}, fmt.Errorf("read session %q: %w", path, err)
	}
	if first {
		// An empty file: Pi gives it a header at start; nothing to pin yet.
		h.exists = false
	}
	return h, nil
}
