package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mdbus/mdbus/internal/sock"
	"github.com/mdbus/mdbus/nak"
	"github.com/mdbus/mdbus/packetconn/impair"
	"github.com/mdbus/mdbus/publisher"
	"github.com/mdbus/mdbus/retransmit"
	"github.com/mdbus/mdbus/subscriber"
	"github.com/mdbus/mdbus/wire"
)

// sender is the publishing side of a run, mdbus or raw. It is used by one
// goroutine.
type sender interface {
	// send sends msgs, each already stamped. The buffers may be reused
	// once send returns.
	send(msgs [][]byte) error
	// finish sends what is pending and the end of the run (mdbus: end of
	// session; raw: end-marker datagrams). Bounded by ctx.
	finish(ctx context.Context) error
	// close releases the socket; safe after finish, and alone.
	close() error
	// packets is the number of data datagrams sent so far.
	packets() uint64
}

// receiver is the subscribing side of a run. Messages go to its sink on the
// receiver's own goroutine.
type receiver interface {
	// ended is closed when the end of the run arrives.
	ended() <-chan struct{}
	// close stops receiving and waits for the receiving goroutine; the
	// sink may be read afterwards.
	close() error
	// counters fills the kernel-drop, gap, repair, loss and packet counts.
	counters(r *SubResult)
}

type sendParams struct {
	group       netip.AddrPort
	ifi         *net.Interface
	ttl         int
	payloadSize int
	writeBuffer int
	batch       int
	inline      bool
	noGSO       bool // mdbus: publisher.Config.DisableGSO
	linger      time.Duration
	// recovery adds the retransmitter: a cache fed by the publisher and a
	// server answering re-requests on 127.0.0.1.
	recovery bool
	// rtxAddr is where the retransmit server listens; invalid: 127.0.0.1.
	rtxAddr netip.Addr
	logger  *slog.Logger
}

// ---- mdbus ----

type mdbusSender struct {
	pub  *publisher.Publication
	srv  *retransmit.Server // nil without recovery
	once sync.Once
	err  error
}

func newMdbusSender(p sendParams) (*mdbusSender, error) {
	cfg := publisher.Config{
		Group:        p.group,
		Interface:    p.ifi.Name,
		TTL:          p.ttl,
		Session:      "BENCH",
		PayloadSize:  p.payloadSize,
		WriteBuffer:  p.writeBuffer,
		Inline:       p.inline,
		Linger:       p.linger,
		DisableGSO:   p.noGSO,
		QueuePackets: 4096,
		Logger:       p.logger,
	}
	s := &mdbusSender{}
	if p.recovery {
		cache := retransmit.NewCache(retransmit.CacheConfig{})
		cfg.Sinks = []publisher.Sink{cache}
		srv, err := retransmit.NewServer(retransmit.ServerConfig{
			Listen:      p.rtxListen(),
			Sources:     []retransmit.Source{cache},
			PayloadSize: p.payloadSize,
			Logger:      p.logger,
		})
		if err != nil {
			return nil, fmt.Errorf("bench: retransmit server: %w", err)
		}
		s.srv = srv
	}
	pub, err := publisher.New(cfg)
	if err != nil {
		if s.srv != nil {
			s.srv.Close()
		}
		return nil, fmt.Errorf("bench: mdbus publisher: %w", err)
	}
	s.pub = pub
	return s, nil
}

// retransmitter is the address subscribers send re-requests to, invalid
// without recovery.
func (s *mdbusSender) retransmitter() netip.AddrPort {
	if s.srv == nil {
		return netip.AddrPort{}
	}
	return s.srv.Addr()
}

func (s *mdbusSender) send(msgs [][]byte) error {
	var err error
	if len(msgs) == 1 {
		_, err = s.pub.Publish(msgs[0])
	} else {
		_, err = s.pub.PublishBatch(msgs)
	}
	return err
}

func (s *mdbusSender) finish(ctx context.Context) error {
	s.once.Do(func() {
		ferr := s.pub.Flush(ctx)
		cerr := s.pub.Close()
		s.err = errors.Join(ferr, cerr)
	})
	return s.err
}

func (s *mdbusSender) close() error {
	err := s.pub.Close()
	if errors.Is(err, publisher.ErrClosed) {
		err = nil
	}
	if s.srv != nil {
		if serr := s.srv.Close(); serr != nil && !errors.Is(serr, net.ErrClosed) {
			err = errors.Join(err, serr)
		}
		s.srv = nil
	}
	return err
}

func (s *mdbusSender) packets() uint64 { return s.pub.Stats().Packets }

type recvParams struct {
	group         netip.AddrPort
	retransmitter netip.AddrPort // mdbus: where NAKs go; invalid: none
	ifi           *net.Interface
	readBuffer    int
	bufSize       int // raw: the largest datagram expected
	timestamps    bool
	busyPoll      time.Duration
	noGRO         bool // mdbus: subscriber.Config.Receive.DisableGRO
	loss          float64
	seed          uint64
	logger        *slog.Logger
}

type mdbusReceiver struct {
	sub     *subscriber.Subscriber
	sink    *sink
	end     chan struct{}
	endOnce sync.Once
	cnt     *countingConn
}

func newMdbusReceiver(p recvParams, sk *sink) (*mdbusReceiver, error) {
	r := &mdbusReceiver{sink: sk, end: make(chan struct{})}
	// The subscriber's defaults otherwise: without a retransmitter it
	// declares a gap lost after its reorder window.
	nc := nak.Config{Seed: p.seed}
	sub, err := subscriber.New(subscriber.Config{
		Group:     p.group,
		Interface: p.ifi.Name,
		Receive: subscriber.Receive{
			ReadBuffer: p.readBuffer,
			Timestamps: p.timestamps,
			BusyPoll:   p.busyPoll,
			DisableGRO: p.noGRO,
		},
		StartSeq: 1,
		Recovery: subscriber.Recovery{
			Retransmitter: p.retransmitter,
			NAK:           nc,
		},
		OnMessage: func(m subscriber.Message) {
			sk.deliver(m.Data, r.cnt.kernelTime(uint64(m.Seq)))
		},
		OnGap: func(g subscriber.Gap) { sk.gap(uint64(g.From), uint64(g.To), Now()) },
		OnEnd: func(subscriber.StreamID, wire.Seq) { r.endOnce.Do(func() { close(r.end) }) },
		Wrap: func(c sock.PacketConn) sock.PacketConn {
			// With Timestamps the feed socket carries SO_TIMESTAMPNS
			// times: remember them per packet for the wire/receive split.
			r.cnt = &countingConn{PacketConn: c, mold: true, stamps: p.timestamps}
			if p.loss > 0 {
				// Loss on the receiving side, after the kernel: the
				// counter sees every datagram that arrived.
				return impair.Receiver(impair.Config{Loss: p.loss, Seed: p.seed})(r.cnt)
			}
			return r.cnt
		},
		Logger: p.logger,
	})
	if err != nil {
		return nil, fmt.Errorf("bench: mdbus subscriber: %w", err)
	}
	r.sub = sub
	return r, nil
}

func (r *mdbusReceiver) ended() <-chan struct{} { return r.end }

func (r *mdbusReceiver) close() error {
	err := r.sub.Close()
	if errors.Is(err, subscriber.ErrClosed) {
		return nil
	}
	return err
}

func (r *mdbusReceiver) counters(res *SubResult) {
	st := r.sub.Stats()
	res.KernelDrops = st.KernelDrops
	res.ReadBuffer = st.ReadBufferGranted
	res.Gaps = st.Gaps
	res.Repairs = st.Recovered
	// Messages never delivered, from the benchmark's own count (it checks
	// the subscriber's LostMessages).
	res.Lost = max(r.sink.missing, st.LostMessages)
	res.Packets = r.cnt.data.Load()
	res.NAKs, res.Retries, res.ConfirmsLater, res.HeldMax = st.NAKs, st.Retries, st.ConfirmsLater, st.HeldMax
	res.AskedP50, res.AskedP99 = st.AskedP50.Seconds(), st.AskedP99.Seconds()
	res.AnsweredP50, res.AnsweredP99 = st.AnsweredP50.Seconds(), st.AnsweredP99.Seconds()
	for i, n := range st.Drops {
		if n > 0 {
			if res.Drops == nil {
				res.Drops = map[string]uint64{}
			}
			res.Drops[subscriber.DropReason(i).String()] = n
		}
	}
}

// countingConn wraps a receiving socket to count data datagrams and, when
// kernel timestamps are on, remember the kernel receive time of the packets
// of the last batch, for the split of latency at the kernel. The subscriber
// delivers a batch's messages right after reading it, but deliveries can
// also come from its other goroutines (repairs), so the times are guarded.
type countingConn struct {
	sock.PacketConn
	mold   bool
	stamps bool
	data   atomic.Uint64
	mu     sync.Mutex
	kt     []ktRange // guarded by mu
}

type ktRange struct {
	first, next uint64
	t           int64
}

func (c *countingConn) ReadBatch(b *sock.Batch) (int, error) {
	n, err := c.PacketConn.ReadBatch(b)
	if n <= 0 {
		return n, err
	}
	if c.stamps {
		c.mu.Lock()
		defer c.mu.Unlock()
		c.kt = c.kt[:0]
	}
	var data uint64
	for i := range b.Msgs[:n] {
		m := &b.Msgs[i]
		if !c.mold {
			data++
			continue
		}
		h, herr := wire.ParseHeader(m.Buf)
		if herr != nil || h.IsHeartbeat() || h.IsEndOfSession() {
			continue
		}
		data++
		if c.stamps && m.KernelTime != 0 {
			c.kt = append(c.kt, ktRange{uint64(h.Seq), uint64(h.Next()), m.KernelTime})
		}
	}
	c.data.Add(data)
	return n, err
}

// kernelTime returns the kernel receive time (CLOCK_REALTIME ns) of the
// packet of the last batch that carried seq, or 0.
func (c *countingConn) kernelTime(seq uint64) int64 {
	if c == nil || !c.stamps {
		return 0
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, r := range c.kt {
		if seq >= r.first && seq < r.next {
			return r.t
		}
	}
	return 0
}

// ---- raw UDP ----

type rawSender struct {
	conn  *sock.Conn
	batch *sock.Batch
	group netip.AddrPort
	sent  uint64
	done  bool
}

func newRawSender(p sendParams) (*rawSender, error) {
	src := netip.IPv4Unspecified()
	if p.group.Addr().Is6() {
		src = netip.IPv6Unspecified()
	}
	c, err := sock.Open(sock.Config{
		Local:       netip.AddrPortFrom(src, 0),
		Interface:   p.ifi,
		TTL:         p.ttl,
		Loopback:    true,
		WriteBuffer: p.writeBuffer,
		SendOnly:    true, // as the publisher's
	})
	if err != nil {
		return nil, fmt.Errorf("bench: raw sender: %w", err)
	}
	return &rawSender{conn: c, batch: sock.NewBatch(max(p.batch, 1), 0), group: p.group}, nil
}

func (s *rawSender) send(msgs [][]byte) error {
	for len(msgs) > 0 {
		n := min(len(msgs), len(s.batch.Msgs))
		for i := range n {
			s.batch.Msgs[i].Buf = msgs[i]
			s.batch.Msgs[i].Addr = s.group
		}
		k, err := s.conn.WriteBatch(s.batch, n)
		s.sent += uint64(k)
		if err != nil {
			return fmt.Errorf("bench: raw send: %w", err)
		}
		msgs = msgs[n:]
	}
	return nil
}

// finish sends three end markers a millisecond apart (a lone datagram can
// be dropped like any other).
func (s *rawSender) finish(ctx context.Context) error {
	if s.done {
		return nil
	}
	s.done = true
	var end [StampLen]byte
	PutStamp(end[:], Now(), endSeq)
	return sendEndMarker(ctx, "raw", func() error { return s.conn.WriteTo(end[:], s.group) })
}

// sendEndMarker sends a run's end marker three times, 1 ms apart (one may
// be lost like any datagram), until ctx ends.
func sendEndMarker(ctx context.Context, system string, send func() error) error {
	for i := range 3 {
		if err := send(); err != nil {
			return fmt.Errorf("bench: %s end marker: %w", system, err)
		}
		if i < 2 {
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(time.Millisecond):
			}
		}
	}
	return nil
}

func (s *rawSender) close() error { return closeConn(s.conn) }

// closeConn closes c; closed already is not an error.
func closeConn(c interface{ Close() error }) error {
	if err := c.Close(); err != nil && !errors.Is(err, net.ErrClosed) {
		return err
	}
	return nil
}

func (s *rawSender) packets() uint64 { return s.sent }

// openRawReceiver opens a socket joined to the group, as a subscriber
// does; gro asks for UDP_GRO. what names the receiver in errors.
func openRawReceiver(p recvParams, gro bool, what string) (*sock.Conn, error) {
	wild := netip.IPv4Unspecified()
	if p.group.Addr().Is6() {
		wild = netip.IPv6Unspecified()
	}
	c, err := sock.Open(sock.Config{
		Local:      netip.AddrPortFrom(wild, p.group.Port()),
		ReusePort:  true,
		ReadBuffer: p.readBuffer,
		Timestamps: p.timestamps,
		BusyPoll:   p.busyPoll,
		GRO:        gro,
	})
	if err != nil {
		return nil, fmt.Errorf("bench: %s: %w", what, err)
	}
	if err := c.Join(p.ifi, p.group.Addr(), netip.Addr{}); err != nil {
		c.Close()
		return nil, fmt.Errorf("bench: %s: %w", what, err)
	}
	return c, nil
}

// rawLoop is the socket and life cycle the raw receivers share: one
// goroutine reads batches and hands each to a handler, until close.
type rawLoop struct {
	conn   *sock.Conn
	pc     sock.PacketConn
	batch  *sock.Batch
	end    chan struct{}
	done   chan struct{}
	closed atomic.Bool
	once   sync.Once
	drops  uint64
	err    error
}

func newRawLoop(c *sock.Conn, batch *sock.Batch) rawLoop {
	return rawLoop{conn: c, pc: c, batch: batch, end: make(chan struct{}), done: make(chan struct{})}
}

// run reads batches until close and hands each to handle, which reports
// whether the end marker was among them. what names the receiver in the
// error a failed read leaves for close.
func (l *rawLoop) run(handle func([]sock.Message) (ended bool), what string) {
	defer close(l.done)
	for {
		n, err := l.pc.ReadBatch(l.batch)
		if err != nil {
			if l.closed.Load() {
				return
			}
			if sock.IsTimeout(err) {
				continue
			}
			l.err = fmt.Errorf("bench: %s: %w", what, err)
			return
		}
		if handle(l.batch.Msgs[:n]) {
			l.once.Do(func() { close(l.end) })
		}
		l.drops = uint64(l.batch.Drops)
	}
}

func (l *rawLoop) ended() <-chan struct{} { return l.end }

func (l *rawLoop) close() error {
	if l.closed.Swap(true) {
		return nil
	}
	l.conn.Close()
	<-l.done
	return l.err
}

// counters fills the socket's counts; the receiver adds its own.
func (l *rawLoop) counters(res *SubResult) {
	res.KernelDrops = l.drops
	res.ReadBuffer = l.conn.ReadBufferGranted
}

type rawReceiver struct {
	rawLoop
	group   netip.Addr
	sink    *sink
	packets uint64
}

const rawBatch = 64

func newRawReceiver(p recvParams, sk *sink) (*rawReceiver, error) {
	c, err := openRawReceiver(p, false, "raw receiver")
	if err != nil {
		return nil, err
	}
	r := &rawReceiver{rawLoop: newRawLoop(c, sock.NewBatch(rawBatch, p.bufSize+1)), group: p.group.Addr(), sink: sk}
	go r.run(r.handle, "raw receive")
	return r, nil
}

// handle delivers a read's packets to the sink and reports whether the end
// marker was among them. It allocates nothing.
func (r *rawReceiver) handle(msgs []sock.Message) (ended bool) {
	for i := range msgs {
		m := &msgs[i]
		if m.Truncated || (m.Dst.IsValid() && m.Dst.Unmap() != r.group) {
			continue
		}
		if _, seq, ok := ParseStamp(m.Buf); ok && seq == endSeq {
			ended = true
			continue
		}
		r.packets++
		r.sink.deliver(m.Buf, m.KernelTime)
	}
	return ended
}

func (r *rawReceiver) counters(res *SubResult) {
	r.rawLoop.counters(res)
	res.Packets = r.packets
	res.Lost = r.sink.missing
}

// quietLogger returns l, or a logger that discards everything.
func quietLogger(l *slog.Logger) *slog.Logger {
	if l != nil {
		return l
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

// stderrW is where child processes' standard error and errLogger go.
var stderrW io.Writer = os.Stderr

// errLogger passes the bus's errors (not its warnings) to standard error.
var errLogger = slog.New(slog.NewTextHandler(stderrW, &slog.HandlerOptions{Level: slog.LevelError}))
