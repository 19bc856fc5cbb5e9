package resume

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"time"

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
// rewind), from its own unicast socket, one request in flight: each asks
// for up to wire.MaxCount messages and the server answers what its caps
// allow. Answers are accepted only from Addr.
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
	count, idle := h.Count, h.Idle
	if count <= 0 || count > wire.MaxCount {
		count = 1024
	}
	if idle <= 0 {
		idle = 5 * time.Millisecond
	}
	local := "127.0.0.1:0"
	network := "udp4"
	if h.Addr.Addr().Is6() {
		local, network = "[::1]:0", "udp6"
		if !h.Addr.Addr().IsLoopback() {
			local = "[::]:0"
		}
	} else if !h.Addr.Addr().IsLoopback() {
		local = "0.0.0.0:0"
	}
	la, err := net.ResolveUDPAddr(network, local)
	if err != nil {
		return from, err
	}
	conn, err := net.ListenUDP(network, la)
	if err != nil {
		return from, fmt.Errorf("resume: history socket: %w", err)
	}
	defer conn.Close()
	_ = conn.SetReadBuffer(4 << 20)
	stop := context.AfterFunc(ctx, func() { conn.SetReadDeadline(time.Unix(1, 0)) })
	defer stop()
	buf := make([]byte, wire.MaxPayloadSize)
	var req []byte
	pos := from
	// single: the retransmitter answers each request with one packet
	// (retransmit.Server's default, as MoldUDP64 servers do). Then the
	// next request leaves as soon as that packet is in, instead of after
	// Idle: one round trip per packet, not one Idle. A second packet for
	// one request shows a server that answers with several, and waiting
	// for the rest of each answer resumes.
	single := false
	for fails := 0; pos < to && fails < tries; {
		if err := ctx.Err(); err != nil {
			return pos, err
		}
		n := min(uint64(to-pos), uint64(count))
		req = wire.AppendRequest(req[:0], wire.Request{Session: s, Seq: pos, Count: uint16(n)})
		if _, err := conn.WriteToUDPAddrPort(req, h.Addr); err != nil {
			return pos, fmt.Errorf("resume: re-request to %s: %w", h.Addr, err)
		}
		want := pos + wire.Seq(n)
		deadline := time.Now().Add(timeout)
		progressed := false
		packets := 0
		for pos < want && !(single && packets > 0) {
			conn.SetReadDeadline(deadline)
			m, src, err := conn.ReadFromUDPAddrPort(buf)
			if err != nil {
				if ctx.Err() != nil {
					return pos, ctx.Err()
				}
				var ne net.Error
				if errors.As(err, &ne) && ne.Timeout() {
					break
				}
				return pos, fmt.Errorf("resume: history from %s: %w", h.Addr, err)
			}
			if netip.AddrPortFrom(src.Addr().Unmap(), src.Port()) != netip.AddrPortFrom(h.Addr.Addr().Unmap(), h.Addr.Port()) {
				continue // not from the retransmitter asked: never trusted
			}
			p, err := wire.ParsePacket(buf[:m])
			if err != nil || p.Session != s || p.IsHeartbeat() || p.IsEndOfSession() {
				continue
			}
			if p.Next() <= pos {
				// Already held: the rest of an earlier answer, so the
				// server sends several packets per request.
				single = false
				continue
			}
			if p.Seq > pos {
				continue // not the next piece (reordered): ask again
			}
			it := p.Messages()
			it.Skip(int(pos - p.Seq))
			for {
				msg, seq, ok := it.Next()
				if !ok || seq >= to {
					break
				}
				if err := emit(seq, msg); err != nil {
					return pos, err
				}
				pos = seq + 1
				progressed = true
			}
			packets++
			deadline = time.Now().Add(idle) // answers keep coming: wait for the rest
		}
		if packets > 1 {
			single = false
		} else if packets == 1 && pos < want {
			single = true // one packet, then nothing for Idle
		}
		if progressed {
			fails = 0
		} else {
			fails++
		}
	}
	return pos, nil
}
