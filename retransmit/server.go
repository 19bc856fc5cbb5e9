package retransmit

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mdbus/mdbus/internal/monotime"
	"github.com/mdbus/mdbus/internal/sock"
	"github.com/mdbus/mdbus/packetconn"
	"github.com/mdbus/mdbus/wire"
)

// Server defaults.
const (
	DefaultInterface          = "lo"
	DefaultCoalesceWindow     = 2 * time.Millisecond
	DefaultMaxPerRequest      = 1024
	DefaultRateBytes          = 100e6 // bytes per second
	DefaultRequesterRateBytes = 20e6  // bytes per second
	DefaultBurst              = 10 * time.Millisecond
	DefaultMaxRequesters      = 4096
	DefaultMaxDeferred        = 4096
	DefaultReadBuffer         = 4 << 20

	readBatchLen  = 64 // requests per recvmmsg
	readBufLen    = 64 // bytes per request buffer: larger datagrams are truncated and refused
	pollBatchLen  = 4  // requests per non-blocking read in poll: the sending goroutine's share stays small
	sendBatchLen  = 64 // packets per sendmmsg
	coalesceSlots = 4096
)

// Errors of the package.
var (
	// ErrClosed is returned by a second Server.Close.
	ErrClosed = errors.New("retransmit: server closed")
	// ErrConfig wraps every configuration error of NewServer.
	ErrConfig = errors.New("retransmit: bad configuration")
)

// ServerConfig describes a Server. The zero value of every field but
// Listen and Sources is its default. A negative value means "none" (no
// coalescing, nothing held back) for the fields whose doc says so
// (CoalesceWindow, MaxDeferred); for every other field a negative value is
// invalid and NewServer returns an error wrapping ErrConfig that names it.
type ServerConfig struct {
	// Listen is the unicast address re-requests come to, for example
	// 127.0.0.1:0, [::1]:0 or [fd77::1]:0. Answers to unicast requesters
	// leave from this socket.
	Listen netip.AddrPort
	// Sources are asked in order for each packet (the cache first, the
	// journal later). At least one.
	Sources []Source
	// RepairGroup, when valid, is the multicast group repairs may go to
	// (subscribers join it as well as the feed).
	RepairGroup netip.AddrPort
	// Interface is the multicast interface of RepairGroup. Default "lo".
	Interface string
	// TTL is the multicast TTL (IPv4) or hop limit (IPv6) of repairs on
	// RepairGroup. Default 0: they stay on this host.
	TTL int
	// AlwaysMulticast answers every request on RepairGroup. It is what a
	// Server with a RepairGroup does by default now; the field stays so
	// that configurations that set it keep their meaning.
	AlwaysMulticast bool
	// UnicastFirst, with a RepairGroup, answers the first request for a
	// range unicast and goes to the group only when a second requester
	// asks within CoalesceWindow. Use it where one subscriber is
	// expected: with many, every one of them that lost the range asks
	// before the second answer, which is what the default (every answer
	// on the group, with a confirm) avoids. Refused with AlwaysMulticast.
	UnicastFirst bool
	// CoalesceWindow: the same range (session, sequence and count after
	// capping) asked again within this time is answered only once more,
	// on RepairGroup, when a second requester asks; see the package doc.
	// Default 2 ms; negative disables coalescing.
	CoalesceWindow time.Duration
	// MaxPerRequest caps the messages answered per request; larger
	// requests are answered truncated. Default 1024, at most
	// wire.MaxCount.
	MaxPerRequest int
	// MaxRequestBytes caps the bytes (whole packets, UDP payload) sent for
	// one request. Default: one packet, as a MoldUDP64 server answers a
	// request with at most one packet, so that a 20-byte request buys at
	// most one payload (about 74 times its size); the requester asks again
	// for the rest (nak does at once). Larger values answer a long gap in
	// fewer round trips at the price of that ratio: set them only for
	// requesters you trust (Allow).
	MaxRequestBytes int
	// RateBytes is the total repair bandwidth in bytes per second (UDP
	// payload, unicast and multicast together). Default 100e6.
	RateBytes float64
	// RequesterRateBytes is the repair bandwidth per requester address
	// (IPv6: per /64) in bytes per second (multicast repairs count for the
	// requester that caused them). Default 20e6.
	RequesterRateBytes float64
	// Burst is the depth of the token buckets as time at their rate: a
	// bucket holds rate*Burst bytes (at least one packet). Default 10 ms.
	Burst time.Duration
	// MaxRequesters is the size of the table of per-requester buckets
	// (least recently used replaced). Default 4096.
	MaxRequesters int
	// MaxDeferred bounds the requests held back for want of bucket
	// tokens, to be answered when the buckets refill (each confirmed at
	// once as wire.ConfirmLater). Beyond it requests are refused
	// (ReasonRateLimited). Default 4096; negative: none held back.
	MaxDeferred int
	// Allow lists the networks requests are accepted from (IPv4-mapped
	// sources are matched as IPv4); empty allows everyone. Requests from
	// elsewhere are counted (ReasonNotAllowed) and ignored.
	Allow []netip.Prefix
	// PayloadSize is the largest answer packet. Default
	// wire.DefaultPayloadSizeIPv4 or IPv6 by the family of each socket.
	PayloadSize int
	// ReadBuffer is the SO_RCVBUF requested for the request socket, in
	// bytes. Default 4 MiB, as a subscriber's feed socket (the common
	// net.core.rmem_max; the kernel doubles it and may grant less): the
	// server is where the re-requests of every subscriber meet, and
	// they come in bursts (a subscriber catching up finds many gaps at
	// once; a slow answer brings a round of retries from all), so its
	// socket must hold more than one subscriber's. A 20-byte request
	// takes about 830 bytes of the buffer on Linux: 8 MiB granted holds
	// about 10,000 requests, 2 MiB about 2,500.
	ReadBuffer int
	// Wrap, when set, wraps the sockets (request socket and repair-group
	// socket), for example with the impairment layer or a byte counter in
	// tests. Closing the wrapped PacketConn must close the socket.
	Wrap func(packetconn.PacketConn) packetconn.PacketConn
	// Logger receives rare events (start, socket errors). Default:
	// discard.
	Logger *slog.Logger
}

// withDefaults returns c with defaults applied, or an error naming the
// first invalid field (matching ErrConfig).
func (c ServerConfig) withDefaults() (ServerConfig, error) {
	if !c.Listen.IsValid() {
		return c, fmt.Errorf("%w: Listen %v is not a valid address and port", ErrConfig, c.Listen)
	}
	if len(c.Sources) == 0 {
		return c, fmt.Errorf("%w: no Sources", ErrConfig)
	}
	for i, s := range c.Sources {
		if s == nil {
			return c, fmt.Errorf("%w: Sources[%d] is nil", ErrConfig, i)
		}
	}
	if c.RepairGroup.IsValid() && (!c.RepairGroup.Addr().IsMulticast() || c.RepairGroup.Port() == 0) {
		return c, fmt.Errorf("%w: RepairGroup %v is not a multicast address with a port", ErrConfig, c.RepairGroup)
	}
	if c.AlwaysMulticast && !c.RepairGroup.IsValid() {
		return c, fmt.Errorf("%w: AlwaysMulticast without a RepairGroup", ErrConfig)
	}
	if c.UnicastFirst && c.AlwaysMulticast {
		return c, fmt.Errorf("%w: UnicastFirst and AlwaysMulticast exclude each other", ErrConfig)
	}
	for i, p := range c.Allow {
		if !p.IsValid() {
			return c, fmt.Errorf("%w: Allow[%d] %v is not a valid prefix", ErrConfig, i, p)
		}
	}
	if c.Interface == "" {
		c.Interface = DefaultInterface
	}
	if c.TTL < 0 || c.TTL > 255 {
		return c, fmt.Errorf("%w: TTL %d outside [0, 255]", ErrConfig, c.TTL)
	}
	// The fields where "none" has no meaning: negative is invalid (see
	// ServerConfig).
	for _, f := range []struct {
		name string
		neg  bool
	}{
		{"MaxPerRequest", c.MaxPerRequest < 0},
		{"MaxRequestBytes", c.MaxRequestBytes < 0},
		{"RateBytes", !(c.RateBytes >= 0)}, // NaN too
		{"RequesterRateBytes", !(c.RequesterRateBytes >= 0)},
		{"Burst", c.Burst < 0},
		{"MaxRequesters", c.MaxRequesters < 0},
		{"ReadBuffer", c.ReadBuffer < 0},
		{"PayloadSize", c.PayloadSize < 0},
	} {
		if f.neg {
			return c, fmt.Errorf("%w: %s is negative: want a positive value (0: the default)", ErrConfig, f.name)
		}
	}
	if c.CoalesceWindow == 0 {
		c.CoalesceWindow = DefaultCoalesceWindow
	}
	if c.MaxPerRequest == 0 {
		c.MaxPerRequest = DefaultMaxPerRequest
	}
	c.MaxPerRequest = min(c.MaxPerRequest, wire.MaxCount)
	// MaxRequestBytes 0: newHandler raises it to one packet.
	if c.RateBytes == 0 {
		c.RateBytes = DefaultRateBytes
	}
	if c.RequesterRateBytes == 0 {
		c.RequesterRateBytes = DefaultRequesterRateBytes
	}
	if c.Burst == 0 {
		c.Burst = DefaultBurst
	}
	if c.MaxRequesters == 0 {
		c.MaxRequesters = DefaultMaxRequesters
	}
	switch {
	case c.MaxDeferred == 0:
		c.MaxDeferred = DefaultMaxDeferred
	case c.MaxDeferred < 0:
		c.MaxDeferred = 0
	}
	if c.PayloadSize != 0 && (c.PayloadSize < wire.MinPayloadSize || c.PayloadSize > wire.MaxPayloadSize) {
		return c, fmt.Errorf("%w: PayloadSize %d outside [%d, %d]", ErrConfig, c.PayloadSize, wire.MinPayloadSize, wire.MaxPayloadSize)
	}
	if c.ReadBuffer == 0 {
		c.ReadBuffer = DefaultReadBuffer
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c, nil
}

func (c ServerConfig) payloadFor(a netip.Addr) int {
	if c.PayloadSize != 0 {
		return c.PayloadSize
	}
	if a.Is4() || a.Is4In6() {
		return wire.DefaultPayloadSizeIPv4
	}
	return wire.DefaultPayloadSizeIPv6
}

// newHandler builds the request logic of a normalized cfg over the given
// connections (mconn nil without a repair group).
func newHandler(cfg ServerConfig, conn, mconn sock.PacketConn, st *counters, onErr func(error)) *handler {
	now := monotime.Now()
	hc := handlerConfig{
		sources:       append([]Source(nil), cfg.Sources...),
		unicastFirst:  cfg.UnicastFirst,
		maxPerRequest: cfg.MaxPerRequest,
		payloadUni:    cfg.payloadFor(cfg.Listen.Addr()),
		allow:         append([]netip.Prefix(nil), cfg.Allow...),
	}
	maxPayload := hc.payloadUni
	if mconn != nil {
		hc.group = cfg.RepairGroup
		hc.payloadMulti = cfg.payloadFor(cfg.RepairGroup.Addr())
		maxPayload = max(maxPayload, hc.payloadMulti)
	}
	hc.maxRequestBytes = max(cfg.MaxRequestBytes, maxPayload)
	burst := func(rate float64) float64 {
		return max(rate*cfg.Burst.Seconds(), float64(maxPayload))
	}
	h := &handler{
		cfg:      hc,
		global:   newBucket(now, cfg.RateBytes, burst(cfg.RateBytes)),
		reqs:     newRequesterTable(cfg.MaxRequesters, cfg.RequesterRateBytes, burst(cfg.RequesterRateBytes)),
		coal:     newCoalesceTable(coalesceSlots, cfg.CoalesceWindow),
		group:    newGroupTable(groupSlots),
		later:    make([]deferred, 0, cfg.MaxDeferred),
		maxLater: cfg.MaxDeferred,
		budget:   newFeedBudget(now, hc.sources, cfg.RateBytes, cfg.RequesterRateBytes, cfg.Burst, float64(maxPayload)),
		uni:      newOutQueue(conn, sendBatchLen, hc.payloadUni, false, st, onErr),
		st:       st,
	}
	if mconn != nil {
		h.multi = newOutQueue(mconn, sendBatchLen, hc.payloadMulti, true, st, onErr)
	}
	return h
}

// Server answers MoldUDP64 re-requests from its Sources; see the package
// documentation for its rules. Its methods are safe for concurrent use.
type Server struct {
	conn    sock.PacketConn
	mconn   sock.PacketConn // nil without a repair group
	addr    netip.AddrPort
	h       *handler
	sources []Source
	// hmu guards h and wake between the serving goroutine and poll.
	hmu  sync.Mutex
	wake monotime.Time // when held-back requests are looked at again; 0: none held
	// pb is poll's batch; lastReq when a request was last read
	// (monotime), for poll's "only while requests come" test.
	pb      *sock.Batch
	lastReq atomic.Int64
	st      counters
	log     *slog.Logger
	quit    chan struct{}
	done    chan struct{}
	closed  atomic.Bool
	stopped atomic.Bool // the serving goroutine ended before Close
	mu      sync.Mutex
	err     error // first unexpected socket error, returned by Err and Close
	logged  atomic.Uint32
}

// NewServer opens the request socket (and the repair-group socket when
// RepairGroup is set) and starts the serving goroutine; Close stops it.
func NewServer(cfg ServerConfig) (*Server, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	uc, err := sock.Open(sock.Config{Local: cfg.Listen, ReadBuffer: cfg.ReadBuffer})
	if err != nil {
		return nil, fmt.Errorf("retransmit: request socket: %w", err)
	}
	s := &Server{conn: uc, addr: sock.Unmap(uc.LocalAddr()), log: cfg.Logger, sources: cfg.Sources,
		quit: make(chan struct{}), done: make(chan struct{})}
	if cfg.RepairGroup.IsValid() {
		ifi, err := net.InterfaceByName(cfg.Interface)
		if err != nil {
			uc.Close()
			return nil, fmt.Errorf("retransmit: repair group interface %q: %w", cfg.Interface, err)
		}
		wild := netip.IPv4Unspecified()
		if cfg.RepairGroup.Addr().Is6() {
			wild = netip.IPv6Unspecified()
		}
		mc, err := sock.Open(sock.Config{Local: netip.AddrPortFrom(wild, 0), Interface: ifi, TTL: cfg.TTL, Loopback: true, SendOnly: true})
		if err != nil {
			uc.Close()
			return nil, fmt.Errorf("retransmit: repair group %s socket: %w", cfg.RepairGroup, err)
		}
		s.mconn = mc
	}
	if cfg.Wrap != nil {
		s.conn = cfg.Wrap(s.conn)
		if s.mconn != nil {
			s.mconn = cfg.Wrap(s.mconn)
		}
	}
	s.h = newHandler(cfg, s.conn, s.mconn, &s.st, s.sendError)
	s.pb = sock.NewBatch(pollBatchLen, readBufLen)
	for _, src := range cfg.Sources {
		if p, ok := src.(pollSource); ok {
			p.addPoller(s)
		}
	}
	s.log.Info("retransmit: serving re-requests", "listen", s.addr, "repair_group", cfg.RepairGroup,
		"max_per_request", cfg.MaxPerRequest, "rate_bytes", cfg.RateBytes, "requester_rate_bytes", cfg.RequesterRateBytes)
	go s.serve()
	return s, nil
}

// Addr is the address re-requests go to.
func (s *Server) Addr() netip.AddrPort { return s.addr }

func (s *Server) serve() {
	defer close(s.done)
	rb := sock.NewBatch(readBatchLen, readBufLen)
	backoff := time.Millisecond
	for {
		n, err := s.conn.ReadBatch(rb)
		if err != nil {
			select {
			case <-s.quit:
				return
			default:
			}
			if sock.IsTimeout(err) {
				s.hmu.Lock()
				s.wake = s.later(monotime.Now(), s.wake)
				s.hmu.Unlock()
				continue
			}
			if errors.Is(err, net.ErrClosed) {
				// Closed under the server, not by Close: nothing more
				// can be read, so the server has stopped serving.
				s.st.readErrors.Add(1)
				s.latch(fmt.Errorf("retransmit: request socket closed, no longer serving: %w", err))
				s.stopped.Store(true)
				return
			}
			s.st.readErrors.Add(1)
			s.latch(err)
			select { // do not spin on a persistent error
			case <-s.quit:
				return
			case <-time.After(backoff):
			}
			backoff = min(2*backoff, 100*time.Millisecond)
			continue
		}
		backoff = time.Millisecond
		s.hmu.Lock()
		s.handleBatch(rb, n)
		s.hmu.Unlock()
		s.st.kernelDrops.Store(uint64(rb.Drops))
	}
}

// handleBatch answers the requests b.Msgs[:n]. s.hmu must be held.
func (s *Server) handleBatch(b *sock.Batch, n int) {
	now := monotime.Now()
	s.lastReq.Store(int64(now))
	s.h.tick(now)
	for i := range n {
		m := &b.Msgs[i]
		s.h.handle(now, m.Buf, m.Truncated, m.Addr)
	}
	s.wake = s.later(now, s.wake)
}

// pollActive is how long after the last request poll keeps reading: a
// feed without loss pays nothing for it.
const pollActive = 100 * time.Millisecond

// poll answers up to pollBatchLen requests queued on the request socket,
// without waiting for them, from the calling goroutine: a Cache the
// server serves calls it from its feeder's goroutine (the publisher's
// sending goroutine) every pollEvery packets. See "Who reads the
// requests" in the package documentation. It does nothing unless a
// request came within pollActive, and returns at once when the serving
// goroutine is handling a batch or the socket cannot be read without
// waiting (a Wrap that does not forward TryReadBatch). It does not
// allocate.
func (s *Server) poll() {
	if now := monotime.Now(); now.Sub(monotime.Time(s.lastReq.Load())) > pollActive || s.closed.Load() {
		return
	}
	tr, ok := s.conn.(packetconn.TryReader)
	if !ok || !s.hmu.TryLock() {
		return
	}
	defer s.hmu.Unlock()
	n, err := tr.TryReadBatch(s.pb)
	if err != nil || n == 0 {
		return // the serving goroutine's read sees a socket error and reports it
	}
	s.st.polled.Add(uint64(n))
	s.handleBatch(s.pb, n)
}

// later answers the held-back requests that can be paid for now, sends
// what is queued, and sets the read deadline to the next look at those
// still held (none when nothing is held). prev is the deadline set last.
func (s *Server) later(now, prev monotime.Time) monotime.Time {
	s.h.tick(now)
	wake := s.h.serveLater(now)
	s.h.flush()
	if wake != prev {
		var t time.Time // zero: no deadline
		if wake != 0 {
			t = time.Now().Add(wake.Sub(now))
		}
		if err := s.conn.SetReadDeadline(t); err != nil && !s.closed.Load() {
			s.latch(fmt.Errorf("retransmit: set read deadline: %w", err))
		}
	}
	return wake
}

func (s *Server) sendError(err error) {
	if s.logged.Add(1) <= 10 {
		s.log.Warn("retransmit: send failed", "err", err)
	}
}

func (s *Server) latch(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err == nil {
		s.err = err
		s.log.Warn("retransmit: read failed", "err", err)
	}
}

// Err returns the first unexpected error reading the request socket, nil
// while there was none. A transient error is retried (ServerStats.ReadErrors
// counts them); a socket closed under the server stops it
// (ServerStats.Stopped). Poll it, or ServerStats, to learn that re-requests
// are no longer being answered before Close reports it.
func (s *Server) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

// Close stops the serving goroutine, closes the sockets and waits. It
// returns the first unexpected socket error, if any (Err); later calls
// return ErrClosed.
func (s *Server) Close() error {
	if s.closed.Swap(true) {
		return ErrClosed
	}
	close(s.quit)
	for _, src := range s.sources {
		if p, ok := src.(pollSource); ok {
			p.removePoller(s)
		}
	}
	err := s.conn.Close()
	if s.mconn != nil {
		err = errors.Join(err, s.mconn.Close())
	}
	<-s.done
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		err = errors.Join(err, s.err)
	}
	if err != nil {
		return fmt.Errorf("retransmit: close: %w", err)
	}
	return nil
}

// RefusedStats counts refused requests by reason; see Reason.
type RefusedStats struct {
	BadSource, NotAllowed                                   uint64
	RequestLen, BadSession, ZeroSeq, ZeroCount, SeqOverflow uint64
	UnknownSession, OutOfRange, TooLarge, RateLimited       uint64
	SourceError                                             uint64
}

// Malformed is the number of requests that did not decode (wire errors).
func (r RefusedStats) Malformed() uint64 {
	return r.RequestLen + r.BadSession + r.ZeroSeq + r.ZeroCount + r.SeqOverflow
}

// String lists the non-zero counts by reason ("rate-limited 3, out-of-range
// 1"), "none" when there are none.
func (r RefusedStats) String() string {
	var b strings.Builder
	for _, x := range [...]struct {
		n    uint64
		name Reason
	}{
		{r.BadSource, ReasonBadSource}, {r.NotAllowed, ReasonNotAllowed}, {r.RequestLen, ReasonRequestLen},
		{r.BadSession, ReasonBadSession}, {r.ZeroSeq, ReasonZeroSeq}, {r.ZeroCount, ReasonZeroCount},
		{r.SeqOverflow, ReasonSeqOverflow}, {r.UnknownSession, ReasonUnknownSession}, {r.OutOfRange, ReasonOutOfRange},
		{r.TooLarge, ReasonTooLarge}, {r.RateLimited, ReasonRateLimited}, {r.SourceError, ReasonSourceError},
	} {
		if x.n == 0 {
			continue
		}
		if b.Len() > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s %d", x.name, x.n)
	}
	if b.Len() == 0 {
		return "none"
	}
	return b.String()
}

// Total is the number of refused requests.
func (r RefusedStats) Total() uint64 {
	return r.Malformed() + r.BadSource + r.NotAllowed + r.UnknownSession +
		r.OutOfRange + r.TooLarge + r.RateLimited + r.SourceError
}

// ServerStats counts what a Server did since NewServer.
type ServerStats struct {
	// Requests is the number of datagrams received on the request socket.
	Requests uint64
	// Polled counts the requests of Requests that a sending goroutine read
	// between its sends, before the server's own goroutine could (see
	// "Who reads the requests" in the package documentation).
	Polled uint64
	// Answered is the number of requests answered with at least one packet.
	Answered uint64
	// Capped counts requests for more than MaxPerRequest messages (answered
	// truncated).
	Capped uint64
	// Partial counts answered requests that got fewer messages than asked
	// (after capping): part of the range not held, MaxRequestBytes, or
	// a bucket ran dry.
	Partial uint64
	// Refused counts requests answered with nothing, by reason.
	Refused RefusedStats
	// Coalesced counts requests not answered again because the same
	// range was answered (or held back) within CoalesceWindow for
	// everyone on the repair group or for the same requester: their
	// answer is already on its way, so they are not refused.
	Coalesced uint64
	// Deferred counts requests held back and confirmed as
	// wire.ConfirmLater: for want of bucket tokens, or (DeferredAhead of
	// them) for messages or a session the sources had not received yet.
	// DeferredAnswered counts those answered since (the rest are still
	// held, or were refused when their range left the sources or never
	// came).
	Deferred, DeferredAhead, DeferredAnswered uint64
	// ToldLater counts requests for messages the sources had not received
	// yet that found the held table full (MaxDeferred, or their host's
	// quarter of it): confirmed "later" without being held, so that their
	// requesters ask again after their retry interval. They are not
	// refused.
	ToldLater uint64
	// Confirms counts the NAK confirms sent (wire.Confirm), ConfirmBytes
	// their bytes.
	Confirms, ConfirmBytes uint64
	// GroupSize is the latest estimate of the distinct requesters heard
	// within 10 s, as sent in confirms.
	GroupSize uint64
	// FeedRate is the feed's rate in bytes per second, as the caches see
	// it, which the buckets follow (see ServerConfig.RateBytes).
	FeedRate uint64
	// UnicastPackets and UnicastBytes are the repairs sent to requesters;
	// MulticastPackets and MulticastBytes those sent on the repair group.
	// Bytes are UDP payload bytes the kernel accepted.
	UnicastPackets, UnicastBytes     uint64
	MulticastPackets, MulticastBytes uint64
	// Messages is the number of messages in repairs queued for sending.
	Messages uint64
	// SendErrors counts datagrams the kernel refused; ReadErrors failed
	// reads of the request socket; KernelDrops requests the kernel dropped
	// for want of receive buffer (SO_RXQ_OVFL).
	SendErrors, ReadErrors, KernelDrops uint64
	// Stopped reports that the server no longer reads requests although
	// Close was not called (its socket failed for good); Err says why.
	Stopped bool
}

// Bytes is the total of repair bytes sent.
func (s ServerStats) Bytes() uint64 { return s.UnicastBytes + s.MulticastBytes }

// Stats returns the server's counters.
func (s *Server) Stats() ServerStats {
	st := s.st.snapshot()
	st.Stopped = s.stopped.Load()
	return st
}

func (c *counters) snapshot() ServerStats {
	r := func(x Reason) uint64 { return c.refused[x].Load() }
	return ServerStats{
		Requests:         c.requests.Load(),
		Polled:           c.polled.Load(),
		Answered:         c.answered.Load(),
		Capped:           c.capped.Load(),
		Partial:          c.partial.Load(),
		Coalesced:        c.coalesced.Load(),
		Deferred:         c.deferred.Load(),
		DeferredAhead:    c.deferredAhead.Load(),
		DeferredAnswered: c.deferredAnswered.Load(),
		ToldLater:        c.toldLater.Load(),
		Confirms:         c.confirms.Load(),
		ConfirmBytes:     c.confirmBytes.Load(),
		GroupSize:        c.groupSize.Load(),
		FeedRate:         c.feedRate.Load(),
		Refused: RefusedStats{
			BadSource: r(ReasonBadSource), NotAllowed: r(ReasonNotAllowed),
			RequestLen: r(ReasonRequestLen), BadSession: r(ReasonBadSession), ZeroSeq: r(ReasonZeroSeq),
			ZeroCount: r(ReasonZeroCount), SeqOverflow: r(ReasonSeqOverflow),
			UnknownSession: r(ReasonUnknownSession),
			OutOfRange:     r(ReasonOutOfRange), TooLarge: r(ReasonTooLarge), RateLimited: r(ReasonRateLimited),
			SourceError: r(ReasonSourceError),
		},
		UnicastPackets:   c.uniPackets.Load(),
		UnicastBytes:     c.uniBytes.Load(),
		MulticastPackets: c.mPackets.Load(),
		MulticastBytes:   c.mBytes.Load(),
		Messages:         c.msgs.Load(),
		SendErrors:       c.sendErrors.Load(),
		ReadErrors:       c.readErrors.Load(),
		KernelDrops:      c.kernelDrops.Load(),
	}
}
