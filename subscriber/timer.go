package subscriber

import (
	"net/netip"
	"time"

	"github.com/mdbus/mdbus/internal/monotime"
	"github.com/mdbus/mdbus/internal/sock"
	"github.com/mdbus/mdbus/wire"
)

// runTimer is the NAK timer goroutine. It sleeps on the core's alarm
// until the earliest time a stream's loss detector has work (pollSend
// sets it, and a new gap due sooner moves it: core.rearm), then polls. On
// Linux the alarm wakes within about 100 µs of its time even in an idle
// program (internal/alarm), where a Go timer alone woke a re-request due
// in 100 µs a millisecond late, and held every repair back by as much. It stops when Close closes the alarm. It allocates nothing per
// wake-up once its request buffer has grown.
func (s *Subscriber) runTimer() {
	defer s.wg.Done()
	for {
		s.pollMu.Lock()
		s.pollSend(monotime.Now())
		s.pollMu.Unlock()
		if !s.c.alarm.Wait() {
			return
		}
	}
}

// pollSend polls every stream with gaps under the core's mutex (requests
// come back to be sent; ranges given up are reported to their streams),
// sets the timer goroutine's alarm to the next poll, then sends the
// requests after releasing it. s.pollMu must be held: it owns the request
// buffers.
func (s *Subscriber) pollSend(now monotime.Time) {
	s.c.mu.Lock()
	reqs, _, _ := s.c.poll(now, s.reqs[:0])
	// Under the mutex, as core.rearm's: the alarm is always c.timerAt.
	if s.c.alarm != nil {
		s.c.alarm.Set(s.c.timerAt)
	}
	// Where each request goes: its source's retransmitter (poll wrote
	// them with RetransmitPort), or the one retransmitter asked.
	var to, from netip.AddrPort
	switched := false
	s.reqTo = s.reqTo[:0]
	switch {
	case s.cfg.Recovery.RetransmitPort != 0:
		s.reqTo = append(s.reqTo, s.c.reqTo...)
	case s.repair != nil:
		from = s.c.ask.addrs[s.c.ask.cur]
		to, switched = s.c.ask.target(now, len(reqs) > 0)
		for range reqs {
			s.reqTo = append(s.reqTo, to)
		}
	}
	s.c.mu.Unlock()
	if switched {
		s.logFailover(from, to)
	}
	s.reqs = reqs
	s.send(reqs, s.reqTo)
}

// failoverLogEvery spaces the failover warnings: with every retransmitter
// down the subscriber moves on every Failover, 20 times a second by
// default.
const failoverLogEvery = time.Second

// logFailover logs a failover from one retransmitter to the next, at most
// once per failoverLogEvery, with the number left unlogged before it.
// It runs on the timer goroutine.
func (s *Subscriber) logFailover(from, to netip.AddrPort) {
	now := monotime.Now()
	if s.failoverLogged != 0 && now.Sub(s.failoverLogged) < failoverLogEvery {
		s.failoverQuiet++
		return
	}
	s.cfg.Logger.Warn("subscriber: retransmitter not answering; asking the next",
		"silent", from, "for", s.cfg.Recovery.Failover, "asking", to, "failovers_not_logged", s.failoverQuiet)
	s.failoverLogged, s.failoverQuiet = now, 0
}

// send sends the re-requests from the unicast repair socket, each
// reqs[i] to dests[i], requestBatchSize per sendmmsg, from preallocated
// buffers. A re-request the kernel refuses (no route to that
// retransmitter) is counted in Stats.NAKErrors and skipped, so that the
// others still leave (sock.SendAll); the detector asks for it again after
// its retry interval. The first failure is logged. Once the subscriber is
// closing, a failure ends the send uncounted.
func (s *Subscriber) send(reqs []wire.Request, dests []netip.AddrPort) {
	if s.repair == nil {
		return
	}
	for len(reqs) > 0 {
		n := min(len(reqs), len(s.out.Msgs))
		for i, r := range reqs[:n] {
			b := s.reqBuf[i*wire.RequestLen : i*wire.RequestLen : (i+1)*wire.RequestLen]
			s.out.Msgs[i] = sock.Message{Buf: wire.AppendRequest(b, r), Addr: dests[i]}
		}
		closing := false
		sock.SendAll(s.repair, s.out, n, func(m *sock.Message, err error) bool {
			if s.closed.Load() {
				closing = true
				return false
			}
			if s.nakErrors.Add(1) == 1 {
				var to netip.AddrPort
				if m != nil {
					to = m.Addr
				}
				s.cfg.Logger.Warn("subscriber: sending a re-request failed; counting further failures in Stats.NAKErrors",
					"retransmitter", to, "err", err)
			}
			return true
		})
		if closing {
			return
		}
		reqs, dests = reqs[n:], dests[n:]
	}
}
