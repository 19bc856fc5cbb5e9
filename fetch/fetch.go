// Package fetch asks a MoldUDP64 re-request server (a retransmitter, a
// rewinder, a recorder serving its journal) for a range of a session's
// messages over unicast UDP: the bus's one re-request client. Stream
// hands the messages over in order as they come (resume's catch-up and
// the recorder's upstream fill use it through resume.RequestHistory);
// Range collects a whole range ("mdbus journal repair").
//
// The socket is connected to the server, so the kernel passes on only
// the server's datagrams (a stream is repaired only from the source it
// names), and nothing is ever sent anywhere else. One request is in
// flight at a time. A MoldUDP64 server may answer a request with one
// packet (retransmit.Server's default, as exchange servers do) or with
// several: Stream starts out waiting Config.Idle for the rest of each
// answer, and once a request was answered by exactly one packet that did
// not cover it, it asks for the next part as soon as each packet is in
// (one round trip per packet instead of one Idle); a second packet for
// one request switches back. Every wait is bounded: a range that makes no
// progress for Config.Tries waits of Config.Wait in a row fails with
// ErrIncomplete naming what is missing.
package fetch

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"time"

	"github.com/mdbus/mdbus/internal/cfgcheck"
	"github.com/mdbus/mdbus/wire"
)

// Defaults of Config fields.
const (
	DefaultWait          = 200 * time.Millisecond
	DefaultTries         = 10
	DefaultMaxPerRequest = 1024 // the retransmit server's default cap
	DefaultIdle          = 5 * time.Millisecond
	// MaxRange caps the messages one Range call collects.
	MaxRange = 1 << 22
)

// readBuffer is the receive buffer Stream asks for: room for a server
// that answers a request with many packets at once.
const readBuffer = 4 << 20

// ErrIncomplete: the server did not answer the whole range.
var ErrIncomplete = errors.New("fetch: the server did not send the whole range")

// ErrConfig: a Config that Stream and Range refuse. Match with errors.Is.
var ErrConfig = errors.New("fetch: invalid config")

// Config describes where and how to fetch. Server and Session are
// required.
//
// One rule for the values of every field: the zero value means the
// default. No field has a "none": a negative value is invalid, and Stream
// and Range return an error wrapping ErrConfig that names it.
type Config struct {
	Server  netip.AddrPort // the re-request address
	Session wire.Session
	// Wait is how long to wait for an answer before asking again;
	// default 200 ms.
	Wait time.Duration
	// Tries is the requests in a row without progress before giving up;
	// default 10.
	Tries int
	// MaxPerRequest is the messages asked per request; default 1024, at
	// most wire.MaxCount.
	MaxPerRequest int
	// Idle is how long to wait for the rest of an answer once part of it
	// came; default 5 ms (a server that capped its answer sends no more).
	Idle time.Duration
}

// withDefaults checks c and returns it with defaults applied.
func (c Config) withDefaults() (Config, error) {
	if err := cfgcheck.Negative(ErrConfig, cfgcheck.F("Wait", c.Wait), cfgcheck.F("Tries", c.Tries),
		cfgcheck.F("MaxPerRequest", c.MaxPerRequest), cfgcheck.F("Idle", c.Idle)); err != nil {
		return c, err
	}
	c.Wait = cmp.Or(c.Wait, DefaultWait)
	c.Tries = cmp.Or(c.Tries, DefaultTries)
	c.MaxPerRequest = min(cmp.Or(c.MaxPerRequest, DefaultMaxPerRequest), wire.MaxCount)
	c.Idle = cmp.Or(c.Idle, DefaultIdle)
	return c, nil
}

// Range fetches the messages [from, to) of cfg.Session from cfg.Server
// and returns them in order (copies, one per sequence).
func Range(ctx context.Context, cfg Config, from, to wire.Seq) ([][]byte, error) {
	if from == wire.InvalidSeq || to <= from || to-from > MaxRange {
		return nil, fmt.Errorf("fetch: bad range [%d, %d): from 1, at most %d messages", from, to, MaxRange)
	}
	out := make([][]byte, 0, to-from)
	_, err := Stream(ctx, cfg, from, to, func(_ wire.Seq, msg []byte) error {
		out = append(out, append(make([]byte, 0, len(msg)), msg...))
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// Stream fetches the messages [from, to) of cfg.Session from cfg.Server
// and calls emit for each in order; msg is valid only during the call.
// It returns the sequence after the last message emitted: to when the
// whole range came, less with an error otherwise (ErrIncomplete when the
// server stopped answering, emit's own error, ctx's).
func Stream(ctx context.Context, cfg Config, from, to wire.Seq, emit func(seq wire.Seq, msg []byte) error) (wire.Seq, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return from, err
	}
	if !cfg.Server.IsValid() {
		return from, fmt.Errorf("fetch: no server address")
	}
	if from == wire.InvalidSeq || to < from {
		return from, fmt.Errorf("fetch: bad range [%d, %d)", from, to)
	}
	if to == from {
		return from, nil
	}
	conn, err := net.DialUDP("udp", nil, net.UDPAddrFromAddrPort(cfg.Server))
	if err != nil {
		return from, fmt.Errorf("fetch: %s: %w", cfg.Server, err)
	}
	defer conn.Close()
	_ = conn.SetReadBuffer(readBuffer)
	stop := context.AfterFunc(ctx, func() { _ = conn.SetReadDeadline(time.Unix(1, 0)) })
	defer stop()

	buf := make([]byte, wire.MaxPayloadSize)
	req := make([]byte, 0, wire.RequestLen)
	pos := from
	single := false // see the package doc
	for fails := 0; pos < to; {
		if fails >= cfg.Tries {
			return pos, fmt.Errorf("%w: %d of [%d, %d) missing from %s after %d tries, starting at %d",
				ErrIncomplete, to-pos, from, to, cfg.Server, cfg.Tries, pos)
		}
		if err := ctx.Err(); err != nil {
			return pos, err
		}
		n := min(uint64(to-pos), uint64(cfg.MaxPerRequest))
		req = wire.AppendRequest(req[:0], wire.Request{Session: cfg.Session, Seq: pos, Count: uint16(n)})
		if _, err := conn.Write(req); err != nil {
			return pos, fmt.Errorf("fetch: send re-request to %s: %w", cfg.Server, err)
		}
		want := pos + wire.Seq(n)
		deadline := time.Now().Add(cfg.Wait)
		progressed := false
		packets := 0
		for pos < want && !(single && packets > 0) {
			_ = conn.SetReadDeadline(deadline)
			m, err := conn.Read(buf)
			if err != nil {
				if ctx.Err() != nil {
					return pos, ctx.Err()
				}
				var ne net.Error
				if errors.As(err, &ne) && ne.Timeout() {
					break
				}
				return pos, fmt.Errorf("fetch: read from %s: %w", cfg.Server, err)
			}
			p, err := wire.ParsePacket(buf[:m])
			if err != nil || p.Session != cfg.Session || p.IsHeartbeat() || p.IsEndOfSession() {
				continue // not an answer: ignore
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
			deadline = time.Now().Add(cfg.Idle) // answers keep coming: wait for the rest
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
