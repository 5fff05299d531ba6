package claims

import (
	"errors"
	"fmt"

	"github.com/mosaic-agents/mosaic/protocol"
)

// refuseHeld refuses taking a key whose current revision is rec (not
// free): already-active while reserved or active (W2), unsafe-replacement
// while stopping, uncertain or stopped without a verified proof (W3).
func refuseHeld(which string, rec *Record) error {
	switch rec.State {
	case Reserved, Active:
		return protocol.Refuse(protocol.CodeAlreadyActive, "%s key is held by claim %s (%s, conversation %q)",
			which, rec.Claim, rec.State, rec.Conversation)
	case Stopped:
		return protocol.Wrap(protocol.CodeUnsafeReplacement, proven(rec), "%s key: claim %s is stopped without a verified proof",
			which, rec.Claim)
	}
	return protocol.Refuse(protocol.CodeUnsafeReplacement, "%s key: claim %s is %s (conversation %q); only a proven stop frees it",
		which, rec.Claim, rec.State, rec.Conversation)
}

// refuseLoad turns a failure to read the keys into a refusal: a corrupt
// record is unsafe-replacement (it may hide a live claim), anything else a
// claim-store failure. Neither is ever read as free.
func refuseLoad(err error) error {
	if errors.Is(err, ErrCorrupt) {
		return protocol.Wrap(protocol.CodeUnsafeReplacement, err, "claim record unreadable; treated as uncertain")
	}
	if protocol.CodeOf(err) != "" {
		return err
	}
	return protocol.Wrap(protocol.CodeClaimStore, err, "claim store unavailable")
}

// refuseWrite turns a failed revision write into a refusal.
func refuseWrite(err error, format string, args ...any) error {
	if protocol.CodeOf(err) != "" {
		return err
	}
	if errors.Is(err, ErrRevisionExists) || errors.Is(err, ErrStale) {
		return protocol.Wrap(protocol.CodeStaleGeneration, err, format, args...)
	}
	return protocol.Wrap(protocol.CodeClaimStore, err, format, args...)
}

func errState(rec *Record, op string) error {
	return protocol.Wrap(protocol.CodeClaimState, fmt.Errorf("%s from %s: %w", op, rec.State, ErrInvalid),
		"claim %s is %s; %s is not allowed", rec.Claim, rec.State, op)
}
