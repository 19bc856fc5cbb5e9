package wire

import (
	"errors"
	"testing"
)

// TestEncoderCountGuard pins the Encoder's MaxCount guard. The guard cannot
// be reached through the exported API (MaxPayloadSize holds at most 32,743
// messages), so the count is set by hand just below the limit.
func TestEncoderCountGuard(t *testing.T) {
	var e Encoder
	e.Reset(nil, Session{'S', ' ', ' ', ' ', ' ', ' ', ' ', ' ', ' ', ' '}, 1, MaxPayloadSize)
	e.count = MaxCount - 1
	if err := e.Add(nil); err != nil {
		t.Fatalf("message %d: %v", MaxCount, err)
	}
	if e.Count() != MaxCount {
		t.Fatalf("Count() = %d, want %d", e.Count(), MaxCount)
	}
	if e.Fits(0) {
		t.Fatal("Fits(0) with MaxCount messages")
	}
	if err := e.Add(nil); !errors.Is(err, ErrPacketFull) {
		t.Fatalf("message %d: %v, want ErrPacketFull", MaxCount+1, err)
	}
	// The header says MaxCount, never the end-of-session count.
	h, err := ParseHeader(e.Bytes())
	if err != nil || h.Count != MaxCount {
		t.Fatalf("header count %d (%v), want %d", h.Count, err, MaxCount)
	}
}
