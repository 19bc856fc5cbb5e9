package subscriber

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"

	"github.com/mdbus/mdbus/internal/sock"
	"github.com/mdbus/mdbus/wire"
)

// Defaults of Config.
const (
	DefaultInterface      = "lo"
	DefaultReadBuffer     = 4 << 20
	DefaultBatchSize      = 64
	DefaultDatagramSize   = wire.MaxPayloadSize
	DefaultMaxStreams     = 64
	DefaultReorderPackets = 1024
	DefaultMaxGap         = 1 << 20
)

// Sentinel errors.
var (
	// ErrClosed is returned by Close after the first call.
	ErrClosed = errors.New("subscriber: closed")
	// ErrConfig wraps every invalid Config.
	ErrConfig = errors.New("subscriber: invalid config")
)

// Config configures a Subscriber. The zero value of every field but Group
// is its default.
type Config struct {
	// Group is the multicast group and port to join (required), IPv4 or
	// IPv6.
	Group netip.AddrPort
	// Interface is the name of the interface to join on; default "lo".
	Interface string
	// Source, when valid, makes the join source-specific (SSM): only
	// datagrams from this address are received. Datagrams from any other
	// source that still reach the socket are dropped (DropWrongSource).
	Source netip.Addr
	// ReadBuffer is the SO_RCVBUF request in bytes; default 4 MiB (the common net.core.rmem_max). The
	// kernel doubles the request and caps it at twice net.core.rmem_max;
	// New logs a warning when it was capped, and Stats reports what was
	// granted.
	ReadBuffer int
	// BatchSize is the datagrams received per recvmmsg call; default 64.
	BatchSize int
	// DatagramSize is the receive buffer per datagram in bytes; default
	// wire.MaxPayloadSize (65507). Larger datagrams are dropped
	// (DropTruncatedDatagram).
	DatagramSize int
	// MaxStreams bounds the streams tracked at once; default 64. A packet
	// that would start one more is dropped (DropTooManyStreams) unless an
	// ended or superseded stream can be forgotten.
	MaxStreams int
	// ReorderPackets bounds the out-of-order packets held per stream;
	// default 1024, negative holds none. Each held packet costs up to its
	// size in memory.
	ReorderPackets int
	// MaxGap is how far ahead of the next expected sequence, in messages,
	// a packet, heartbeat or end of session may be; beyond it is dropped
	// (DropSeqJump). Default 1<<20.
	MaxGap uint64
	// StartSeq is the first sequence expected of every stream. 0 joins
	// live: the first packet seen starts the stream. A positive StartSeq
	// makes earlier sequences stale and a later first packet a gap.
	StartSeq wire.Seq
	// OnMessage receives every message, in sequence order per stream,
	// once per sequence. The Message's Data is valid only until it
	// returns.
	OnMessage func(Message)
	// OnGap receives each newly found missing range.
	OnGap func(Gap)
	// OnEnd is called when a stream's end of session is reached with
	// everything before it delivered; the argument is the sequence after
	// the session's last message.
	OnEnd func(StreamID, wire.Seq)
	// Wrap, when set, wraps the socket (tests insert the impairment layer
	// here).
	Wrap func(sock.PacketConn) sock.PacketConn
	// Logger receives warnings and errors; default slog.Default().
	Logger *slog.Logger
}

// withDefaults validates c and fills in its defaults.
func (c Config) withDefaults() (Config, error) {
	c.Group = netip.AddrPortFrom(c.Group.Addr().Unmap(), c.Group.Port())
	if !c.Group.Addr().IsMulticast() || c.Group.Port() == 0 {
		return c, fmt.Errorf("%w: group %s: want a multicast address and a port", ErrConfig, c.Group)
	}
	if c.Source.IsValid() {
		c.Source = c.Source.Unmap()
		if c.Source.Is4() != c.Group.Addr().Is4() {
			return c, fmt.Errorf("%w: source %s and group %s are of different IP versions", ErrConfig, c.Source, c.Group.Addr())
		}
	}
	if c.Interface == "" {
		c.Interface = DefaultInterface
	}
	if c.ReadBuffer <= 0 {
		c.ReadBuffer = DefaultReadBuffer
	}
	if c.BatchSize <= 0 {
		c.BatchSize = DefaultBatchSize
	}
	if c.DatagramSize <= 0 {
		c.DatagramSize = DefaultDatagramSize
	}
	c.DatagramSize = max(c.DatagramSize, wire.HeaderLen)
	if c.MaxStreams <= 0 {
		c.MaxStreams = DefaultMaxStreams
	}
	switch {
	case c.ReorderPackets == 0:
		c.ReorderPackets = DefaultReorderPackets
	case c.ReorderPackets < 0:
		c.ReorderPackets = 0
	}
	if c.MaxGap == 0 {
		c.MaxGap = DefaultMaxGap
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c, nil
}

func (c Config) core() coreConfig {
	return coreConfig{
		maxStreams: c.MaxStreams,
		reorder:    c.ReorderPackets,
		maxGap:     c.MaxGap,
		startSeq:   c.StartSeq,
		onMessage:  c.OnMessage,
		onGap:      c.OnGap,
		onEnd:      c.OnEnd,
	}
}

// Subscriber receives one multicast group and delivers its streams in
// order. Its methods are safe for concurrent use, but not from inside its
// callbacks (they run with its lock held).
type Subscriber struct {
	cfg     Config
	c       *core
	r       *reader
	conn    sock.PacketConn
	granted int

	closed  atomic.Bool
	done    chan struct{}
	errMu   sync.Mutex
	loopErr error
}

// New opens a socket bound to the wildcard address and the group's port
// (shared with other subscribers of that port), joins the group on the
// interface (source-specific when Config.Source is set) and starts the
// receive goroutine. Close stops it.
func New(cfg Config) (*Subscriber, error) {
	s, err := open(cfg)
	if err != nil {
		return nil, err
	}
	go s.run()
	return s, nil
}

// open is New without the receive goroutine (tests drive s.r themselves).
func open(cfg Config) (*Subscriber, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	ifi, err := net.InterfaceByName(cfg.Interface)
	if err != nil {
		return nil, fmt.Errorf("subscriber: interface %q: %w", cfg.Interface, err)
	}
	wild := netip.IPv4Unspecified()
	if cfg.Group.Addr().Is6() {
		wild = netip.IPv6Unspecified()
	}
	conn, err := sock.Open(sock.Config{
		Local:      netip.AddrPortFrom(wild, cfg.Group.Port()),
		ReusePort:  true,
		ReadBuffer: cfg.ReadBuffer,
	})
	if err != nil {
		return nil, fmt.Errorf("subscriber: %w", err)
	}
	if err := conn.Join(ifi, cfg.Group.Addr(), cfg.Source); err != nil {
		conn.Close()
		return nil, fmt.Errorf("subscriber: %w", err)
	}
	granted := conn.ReadBufferGranted
	if granted < 2*cfg.ReadBuffer {
		cfg.Logger.Warn("subscriber: the kernel capped the receive buffer; raise net.core.rmem_max to get the requested size",
			"group", cfg.Group, "requested", cfg.ReadBuffer, "granted", granted, "want_granted", 2*cfg.ReadBuffer)
	}
	var pc sock.PacketConn = conn
	if cfg.Wrap != nil {
		pc = cfg.Wrap(pc)
	}
	s := &Subscriber{
		cfg:     cfg,
		c:       newCore(cfg.core()),
		conn:    pc,
		granted: granted,
		done:    make(chan struct{}),
	}
	s.r = &reader{
		conn:   pc,
		batch:  sock.NewBatch(cfg.BatchSize, cfg.DatagramSize),
		c:      s.c,
		group:  cfg.Group.Addr(),
		source: cfg.Source,
	}
	return s, nil
}

// run is the receive goroutine: it reads until Close.
func (s *Subscriber) run() {
	defer close(s.done)
	for {
		err := s.r.readOnce()
		if err == nil {
			continue
		}
		if s.closed.Load() {
			return
		}
		if sock.IsTimeout(err) {
			continue
		}
		s.errMu.Lock()
		s.loopErr = fmt.Errorf("subscriber: receive on %s: %w", s.cfg.Group, err)
		s.errMu.Unlock()
		s.cfg.Logger.Error("subscriber: receive failed; stopped", "group", s.cfg.Group, "err", err)
		return
	}
}

// Close leaves the group, closes the socket and waits for the receive
// goroutine to stop. It returns the error that stopped the receive loop
// early, if any. Calls after the first return ErrClosed. It must not be
// called from a callback.
func (s *Subscriber) Close() error {
	if !s.closed.CompareAndSwap(false, true) {
		return ErrClosed
	}
	cerr := s.conn.Close()
	<-s.done
	s.errMu.Lock()
	defer s.errMu.Unlock()
	if s.loopErr != nil {
		return s.loopErr
	}
	if cerr != nil {
		return fmt.Errorf("subscriber: close: %w", cerr)
	}
	return nil
}

// LocalAddr is the address the socket is bound to: the wildcard address
// and the group's port.
func (s *Subscriber) LocalAddr() netip.AddrPort { return s.conn.LocalAddr() }

// Stats returns the counters since New. They stay readable after Close.
func (s *Subscriber) Stats() Stats {
	s.c.mu.Lock()
	st := s.c.stats()
	s.c.mu.Unlock()
	st.ReadBufferRequested = s.cfg.ReadBuffer
	st.ReadBufferGranted = s.granted
	return st
}

// Streams returns the state of every stream, ordered by source then
// session.
func (s *Subscriber) Streams() []StreamStats {
	s.c.mu.Lock()
	defer s.c.mu.Unlock()
	return s.c.streamStats()
}
