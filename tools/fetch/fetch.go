// Package fetch asks a MoldUDP64 re-request server (a retransmitter, a
// rewinder, a recorder serving its journal) for a range of a session's
// messages over unicast UDP, and collects the answers: the client side of
// "mdbus journal repair".
//
// The socket is connected to the server, so only the server's datagrams
// are read (a stream is repaired only from the source it names), and
// nothing is ever sent anywhere else. Every wait is bounded: a range that
// is not complete after Config.Tries silent waits fails with ErrIncomplete
// naming what is missing.
package fetch

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"time"

	"github.com/mdbus/mdbus/wire"
)

// Defaults of Config fields.
const (
	DefaultWait          = 200 * time.Millisecond
	DefaultTries         = 10
	DefaultMaxPerRequest = 1024 // the retransmit server's default cap
	// MaxRange caps the messages one Range call collects.
	MaxRange = 1 << 22
)

// ErrIncomplete: the server did not answer the whole range.
var ErrIncomplete = errors.New("fetch: the server did not send the whole range")

// Config describes where and how to fetch. The zero value of every field
// but Server and Session is its default.
type Config struct {
	Server        netip.AddrPort // the re-request address
	Session       wire.Session
	Wait          time.Duration // how long to wait for an answer before asking again; default 200 ms
	Tries         int           // silent waits in a row before giving up; default 10
	MaxPerRequest int           // messages asked per request; default 1024, at most wire.MaxCount
}

func (c Config) withDefaults() Config {
	if c.Wait <= 0 {
		c.Wait = DefaultWait
	}
	if c.Tries <= 0 {
		c.Tries = DefaultTries
	}
	if c.MaxPerRequest <= 0 {
		c.MaxPerRequest = DefaultMaxPerRequest
	}
	c.MaxPerRequest = min(c.MaxPerRequest, wire.MaxCount)
	return c
}

// Range fetches the messages [from, to) of cfg.Session from cfg.Server
// and returns them in order (copies, one per sequence).
func Range(ctx context.Context, cfg Config, from, to wire.Seq) ([][]byte, error) {
	cfg = cfg.withDefaults()
	if !cfg.Server.IsValid() {
		return nil, fmt.Errorf("fetch: no server address")
	}
	if from == wire.InvalidSeq || to <= from || to-from > MaxRange {
		return nil, fmt.Errorf("fetch: bad range [%d, %d): from 1, at most %d messages", from, to, MaxRange)
	}
	conn, err := net.DialUDP("udp", nil, net.UDPAddrFromAddrPort(cfg.Server))
	if err != nil {
		return nil, fmt.Errorf("fetch: %s: %w", cfg.Server, err)
	}
	defer conn.Close()
	stop := context.AfterFunc(ctx, func() { _ = conn.SetReadDeadline(time.Unix(1, 0)) })
	defer stop()

	out := make([][]byte, to-from)
	missing := int(to - from)
	next := from // lowest sequence not yet received
	buf := make([]byte, wire.MaxPayloadSize)
	req := make([]byte, 0, wire.RequestLen)
	silent := 0
	for missing > 0 {
		for next < to && out[next-from] != nil {
			next++
		}
		end := next
		for end < to && int(end-next) < cfg.MaxPerRequest && out[end-from] == nil {
			end++
		}
		req = wire.AppendRequest(req[:0], wire.Request{Session: cfg.Session, Seq: next, Count: uint16(end - next)})
		if _, err := conn.Write(req); err != nil {
			return nil, fmt.Errorf("fetch: send re-request to %s: %w", cfg.Server, err)
		}
		progress := false
		deadline := time.Now().Add(cfg.Wait)
		for {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			_ = conn.SetReadDeadline(deadline)
			n, err := conn.Read(buf)
			if err != nil {
				var ne net.Error
				if errors.As(err, &ne) && ne.Timeout() {
					break
				}
				return nil, fmt.Errorf("fetch: read from %s: %w", cfg.Server, err)
			}
			p, err := wire.ParsePacket(buf[:n])
			if err != nil || p.Session != cfg.Session {
				continue // not an answer: ignore
			}
			it := p.Messages()
			for {
				msg, seq, ok := it.Next()
				if !ok {
					break
				}
				if seq < from || seq >= to || out[seq-from] != nil {
					continue
				}
				out[seq-from] = append(make([]byte, 0, len(msg)), msg...)
				missing--
				progress = true
			}
			if missing == 0 || (progress && out[end-1-from] != nil) {
				break // this request is answered: ask for the next part
			}
		}
		if progress {
			silent = 0
			continue
		}
		if silent++; silent >= cfg.Tries {
			return nil, fmt.Errorf("%w: %d of [%d, %d) missing from %s after %d tries, starting at %d",
				ErrIncomplete, missing, from, to, cfg.Server, cfg.Tries, next)
		}
	}
	return out, nil
}
