package controller

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/unix"

	"github.com/mosaic-agents/mosaic/claims"
)

// The mark: what a Claude engine's controller vouched for and what its
// engine announced, kept where a crash does not take it. A restart hands
// both over in the claim (handover.go); a controller that crashes (a
// SIGKILL, the OOM killer, a panic) hands over nothing, and its
// successor, re-attaching through the fd store, would vouch for the
// transcript as it reads it, a tool's forged line left unproven
// included. So the controller keeps a memfd in the fd store beside the
// engine's descriptors (`<execution>.mark`) and writes into it each
// time the watch vouches for more or the engine announces a line; the
// next controller reads it back when the claim holds no handover.
//
// Alternatives weighed:
//   - a claim revision per change: each is a few fsyncs, per frame of a
//     streaming answer;
//   - a file in the runtime directory: it outlives the service (stale
//     marks to clean up) and needs a path a confined engine must be kept
//     from; the memfd is reachable only through this process's and the
//     manager's descriptors, and the manager closes it when the service
//     stops for good;
//   - the restart's handover alone: nothing survives a crash.
//
// Two slots, written in turn, each with a sequence number and a SHA-256
// of itself: a write cut by the crash it exists for leaves the other
// slot whole, and the reader takes the newest slot that checks.

// markSlot is the size of one slot: a header, at most
// claims.MaxAnnouncements announcements of at most 1024-byte uuids and as
// many notification counts.
const markSlot = 128 << 10

// markHeader is a slot's sequence number (8 bytes), its payload's length
// (4) and the SHA-256 of the two and the payload (32).
const markHeader = 8 + 4 + sha256.Size

// markState is what a mark holds.
type markState struct {
	Execution string                `json:"execution"`
	Vouched   *claims.FileState     `json:"vouched,omitempty"`
	Announced []claims.Announcement `json:"announced,omitempty"`
	// Notified are the counts of the latest task notifications the
	// engine announced (claude.Notice): a notification's line is proven
	// by a count of frames, not a uuid.
	Notified []markNotice `json:"notified,omitempty"`
}

// markNotice is a claude.Notice as a mark holds it: what the line says
// (hclaude.Said, lowercase hex) and how many frames announced it.
type markNotice struct {
	Said string `json:"said"`
	N    int    `json:"n"`
}

// errNoMark is a mark with no slot that checks: never written, or both
// slots damaged.
var errNoMark = errors.New("no slot of the mark checks")

// newMark makes the memfd a mark is written into: both slots, its size
// sealed (nobody grows or shrinks it; the writes stay in place).
func newMark() (*os.File, error) {
	fd, err := unix.MemfdCreate("mosaic-mark", unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	if err != nil {
		return nil, fmt.Errorf("memfd_create: %w", err)
	}
	f := os.NewFile(uintptr(fd), "mosaic-mark")
	if err := f.Truncate(2 * markSlot); err != nil {
		f.Close()
		return nil, fmt.Errorf("size the mark: %w", err)
	}
	if _, err := unix.FcntlInt(f.Fd(), unix.F_ADD_SEALS, unix.F_SEAL_GROW|unix.F_SEAL_SHRINK|unix.F_SEAL_SEAL); err != nil {
		f.Close()
		return nil, fmt.Errorf("seal the mark's size: %w", err)
	}
	return f, nil
}

// writeMark writes st into the slot after seq's (seq+1 is the new
// sequence number) and returns it. Announcements that would not fit are
// dropped oldest first.
func writeMark(f *os.File, seq uint64, st markState) (uint64, error) {
	var body []byte
	for {
		b, err := json.Marshal(st)
		if err != nil {
			return seq, err
		}
		if markHeader+len(b) <= markSlot {
			body = b
			break
		}
		if len(st.Announced) == 0 {
			return seq, fmt.Errorf("the mark of execution %s does not fit a slot (%d bytes)", st.Execution, len(b))
		}
		st.Announced = st.Announced[1:]
	}
	seq++
	buf := make([]byte, markHeader+len(body))
	binary.LittleEndian.PutUint64(buf, seq)
	binary.LittleEndian.PutUint32(buf[8:], uint32(len(body)))
	copy(buf[markHeader:], body)
	sum := markSum(buf)
	copy(buf[12:markHeader], sum[:])
	if _, err := f.WriteAt(buf, int64(seq%2)*markSlot); err != nil {
		return seq - 1, fmt.Errorf("write the mark of execution %s: %w", st.Execution, err)
	}
	return seq, nil
}

// markSum is the SHA-256 of a slot's sequence number, length and payload.
func markSum(slot []byte) [sha256.Size]byte {
	h := sha256.New()
	h.Write(slot[:12])
	h.Write(slot[markHeader:])
	var s [sha256.Size]byte
	h.Sum(s[:0])
	return s
}

// readMark returns the newest slot of f that checks, and its sequence
// number (the writer of a re-attached execution goes on from it).
func readMark(f *os.File) (markState, uint64, error) {
	var best markState
	var bestSeq uint64
	found := false
	buf := make([]byte, markSlot)
	for slot := range int64(2) {
		n, err := f.ReadAt(buf, slot*markSlot)
		if n < markHeader {
			if err != nil {
				return markState{}, 0, fmt.Errorf("read the mark: %w", err)
			}
			continue
		}
		seq, size := binary.LittleEndian.Uint64(buf), int(binary.LittleEndian.Uint32(buf[8:]))
		if seq == 0 || seq%2 != uint64(slot) || size > n-markHeader {
			continue
		}
		b := buf[:markHeader+size]
		if markSum(b) != [sha256.Size]byte(b[12:markHeader]) {
			continue
		}
		var st markState
		if err := json.Unmarshal(b[markHeader:], &st); err != nil {
			continue
		}
		if !found || seq > bestSeq {
			best, bestSeq, found = st, seq, true
		}
	}
	if !found {
		return markState{}, 0, errNoMark
	}
	return best, bestSeq, nil
}
