package resume

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"time"

	"github.com/mdbus/mdbus/fetch"
	"github.com/mdbus/mdbus/journal"
	"github.com/mdbus/mdbus/wire"
)

// History yields the messages of a session before the live feed: from a
// journal on disk or by re-request from a retransmitter.
type History interface {
	// Fetch calls emit for messages of session s in order from from, up
	// to (not including) to, and returns the sequence after the last one
	// emitted. It may stop early (at what it holds); it returns an error
	// only when it could not go on (ctx ended, the source failed).
	Fetch(ctx context.Context, s wire.Session, from, to wire.Seq, emit func(seq wire.Seq, msg []byte) error) (wire.Seq, error)
}

// JournalHistory reads history from a journal: the newest incarnation of
// the session.
type JournalHistory struct{ J *journal.Journal }

// Fetch implements History.
func (h JournalHistory) Fetch(ctx context.Context, s wire.Session, from, to wire.Seq, emit func(wire.Seq, []byte) error) (wire.Seq, error) {
	id, ok := h.J.Latest(s, netip.AddrPort{})
	if !ok {
		return from, nil
	}
	r, err := h.J.OpenReader(id)
	if err != nil {
		return from, fmt.Errorf("resume: journal history: %w", err)
	}
	defer r.Close()
	first, next := r.Bounds()
	if from < first || from >= next {
		return from, nil
	}
	if err := r.SeekSeq(from); err != nil {
		return from, fmt.Errorf("resume: journal history seek %d: %w", from, err)
	}
	pos := from
	for pos < to {
		if pos%4096 == 0 && ctx.Err() != nil {
			return pos, ctx.Err()
		}
		rec, err := r.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return pos, fmt.Errorf("resume: journal history at %d: %w", pos, err)
		}
		if rec.Seq != pos {
			return pos, fmt.Errorf("resume: journal history: got sequence %d, want %d", rec.Seq, pos)
		}
		if err := emit(rec.Seq, rec.Data); err != nil {
			return pos, err
		}
		pos++
	}
	return pos, nil
}

// Defaults of RequestHistory.
const (
	DefaultRequestTimeout = 50 * time.Millisecond
	DefaultRequestTries   = 40
)

// RequestHistory fetches history by MoldUDP64 re-requests to a
// retransmitter (a retransmit.Server, mdbus pub --retransmit, mdbus
// rewind) through package fetch: one request in flight, answers accepted
// only from Addr, one round trip per packet from a server that answers
// each request with one packet.
type RequestHistory struct {
	Addr    netip.AddrPort
	Timeout time.Duration // per request; default DefaultRequestTimeout
	Tries   int           // requests without progress before giving up; default DefaultRequestTries
	// Count is the messages asked per request; default 1024 (what a
	// retransmit.Server answers by default), at most wire.MaxCount.
	Count int
	// Idle is how long to wait for the rest of an answer once part of it
	// came; default 5 ms (a server that capped its answer sends no more).
	Idle time.Duration
}

// Fetch implements History. It returns early, without error, when the
// retransmitter stops answering for Tries timeouts in a row (the range
// fell out of its cache, or it is down).
func (h RequestHistory) Fetch(ctx context.Context, s wire.Session, from, to wire.Seq, emit func(wire.Seq, []byte) error) (wire.Seq, error) {
	timeout, tries := h.Timeout, h.Tries
	if timeout <= 0 {
		timeout = DefaultRequestTimeout
	}
	if tries <= 0 {
		tries = DefaultRequestTries
	}
	pos, err := fetch.Stream(ctx, fetch.Config{
		Server: h.Addr, Session: s, Wait: timeout, Tries: tries,
		MaxPerRequest: h.Count, Idle: h.Idle,
	}, from, to, emit)
	if errors.Is(err, fetch.ErrIncomplete) {
		return pos, nil
	}
	return pos, err // fetch's errors name the server; emit's and ctx's pass unchanged
}
