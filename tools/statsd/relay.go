package statsd

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/mdbus/mdbus/internal/cfgcheck"
	"github.com/mdbus/mdbus/internal/sock"
	"github.com/mdbus/mdbus/publisher"
	"github.com/mdbus/mdbus/retransmit"
)

// Relay defaults.
const (
	DefaultListen       = "127.0.0.1:8125"
	DefaultRelayBuffer  = 8 << 20
	DefaultRelayBatch   = 64
	DefaultDatagramSize = 65536
	DefaultLogEvery     = time.Second
	DefaultSelfInterval = 10 * time.Second
	// DefaultLinger is the publisher linger a relay uses unless its Bus
	// config sets one: packets leave full under load.
	DefaultLinger = 200 * time.Microsecond
	// SelfPrefix starts the names of the metrics the relay and collector
	// publish about themselves.
	SelfPrefix = "mdbus.statsd."
)

// ErrClosed is returned by calls on a closed Relay, Client or Collector.
var ErrClosed = errors.New("statsd: closed")

// ErrConfig wraps every invalid configuration.
var ErrConfig = errors.New("statsd: invalid config")

// RelayConfig configures a Relay. Bus.Group is required.
//
// One rule for the values of every field, here, in ClientConfig,
// CollectorConfig and Limits: the zero value means the default. A
// negative value means "none" or "off" only for the fields whose doc
// says "negative:" (SelfInterval); for every other field a negative value
// is invalid and NewRelay, NewClient and NewCollector return an error
// wrapping ErrConfig that names it.
type RelayConfig struct {
	// Listen is the UDP address StatsD clients send to, IPv4 or IPv6.
	// Default 127.0.0.1:8125.
	Listen netip.AddrPort
	// NoUDP disables the UDP listener (with Unix set).
	NoUDP bool
	// Unix, when set, is the path of a Unix datagram socket to listen on
	// as well (DogStatsD's unix:// transport). A socket file left by a
	// process that is gone is replaced; one that a running process still
	// reads is refused (a *ListenError wrapping syscall.EADDRINUSE).
	Unix string
	// ReadBuffer is the SO_RCVBUF request of the listening sockets;
	// default 8 MiB.
	ReadBuffer int
	// BatchSize is the datagrams read per recvmmsg; default 64.
	BatchSize int
	// DatagramSize is the receive buffer per datagram; default 65536. A
	// larger datagram is cut and its last line refused (ReasonTruncated).
	DatagramSize int
	// Limits bound each line.
	Limits Limits
	// PreAggregate, when positive, sums counters and keeps the last value
	// of gauges per name and tags over this window before publishing, to
	// cut bus traffic. Default 0: every metric is published as received.
	PreAggregate time.Duration
	// TickInterval is the clock tick period; default
	// DefaultTickInterval. At every multiple of it since the epoch the
	// relay publishes a tick unless a message went out since that
	// instant. Collectors close a flush interval when the stream's clock
	// passes its end: one that is a multiple of TickInterval closes as
	// it ends, any other within TickInterval of its end.
	TickInterval time.Duration
	// SelfInterval is how often the relay publishes its own counters
	// (mdbus.statsd.relay.*) as counter lines; default 10 s; negative:
	// none, never.
	SelfInterval time.Duration
	// MaxMessageLen bounds one bus message; default DefaultMaxMessageLen.
	MaxMessageLen int
	// Bus is the publication's config (Group required). A zero Linger is
	// DefaultLinger here.
	Bus publisher.Config
	// Retransmit, when valid, runs a retransmit.Cache and Server on this
	// unicast address for the collectors' re-requests (as mdbus pub
	// --retransmit does).
	Retransmit netip.AddrPort
	// Cache configures that cache.
	Cache retransmit.CacheConfig
	// EndGrace is how long Close keeps answering re-requests after the
	// end of session, so collectors can repair a lost tail; default 1 s.
	EndGrace time.Duration
	// Logger receives refused lines (at most one per LogEvery with the
	// count of those not logged) and errors. Default: discard.
	Logger   *slog.Logger
	LogEvery time.Duration
	// Now returns the relay clock in Unix nanoseconds; default
	// time.Now().UnixNano(). Tests may replace it.
	Now func() int64
}

func (c RelayConfig) withDefaults() (RelayConfig, error) {
	if !c.Listen.IsValid() {
		c.Listen = netip.MustParseAddrPort(DefaultListen)
	}
	if c.NoUDP && c.Unix == "" {
		return c, fmt.Errorf("%w: NoUDP without a Unix socket: nothing to listen on", ErrConfig)
	}
	if err := c.Limits.check(cfgcheck.F("ReadBuffer", c.ReadBuffer), cfgcheck.F("BatchSize", c.BatchSize),
		cfgcheck.F("DatagramSize", c.DatagramSize), cfgcheck.F("PreAggregate", c.PreAggregate),
		cfgcheck.F("TickInterval", c.TickInterval), cfgcheck.F("MaxMessageLen", c.MaxMessageLen),
		cfgcheck.F("EndGrace", c.EndGrace), cfgcheck.F("LogEvery", c.LogEvery)); err != nil {
		return c, err
	}
	if err := c.Cache.Validate(); err != nil {
		return c, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	c.ReadBuffer = cmp.Or(c.ReadBuffer, DefaultRelayBuffer)
	c.BatchSize = cmp.Or(c.BatchSize, DefaultRelayBatch)
	c.DatagramSize = cmp.Or(c.DatagramSize, DefaultDatagramSize)
	c.TickInterval = cmp.Or(c.TickInterval, DefaultTickInterval)
	c.EndGrace = cmp.Or(c.EndGrace, time.Second)
	if c.Bus.Grace == 0 {
		// The publication's Close repeats the end of session and waits
		// EndGrace while the retransmit server (closed after it) answers.
		c.Bus.Grace = c.EndGrace
	}
	if c.SelfInterval == 0 {
		c.SelfInterval = DefaultSelfInterval
	}
	if c.Bus.Linger == 0 && !c.Bus.Inline {
		c.Bus.Linger = DefaultLinger
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	c.LogEvery = cmp.Or(c.LogEvery, DefaultLogEvery)
	c.Limits = c.Limits.withDefaults()
	return c, nil
}

// RelayStats are a relay's counters since it started.
type RelayStats struct {
	// Datagrams and Bytes received on the listeners.
	Datagrams, Bytes uint64
	// Metrics accepted and published (each etsy part and each line
	// counts one; packed values count one line).
	Metrics uint64
	// Bad counts refused lines by Reason; BadTotal is their sum.
	Bad      [NumReasons]uint64
	BadTotal uint64
	// KernelDrops is the datagrams the kernel dropped on the UDP socket
	// because its receive buffer was full (SO_RXQ_OVFL): StatsD traffic
	// lost before the relay saw it.
	KernelDrops uint64
	// Messages is the bus messages published, ticks included;
	// PublishErrors those refused by the publication.
	Messages, PublishErrors uint64
	// ReadErrors counts failed reads on the listeners.
	ReadErrors uint64
}

type relayCounters struct {
	datagrams, bytes, metrics, kernelDrops, readErrors atomic.Uint64
	bad                                                [NumReasons]atomic.Uint64
}

// Relay receives StatsD datagrams and publishes the valid metrics on the
// bus. Its methods are safe for concurrent use.
type Relay struct {
	cfg       RelayConfig
	pub       *publisher.Publication
	srv       *retransmit.Server
	em        *emitter
	udp       *sock.Conn
	unix      *net.UnixConn
	ctx       context.Context
	cancel    context.CancelFunc
	wg        sync.WaitGroup
	closeOnce sync.Once
	st        relayCounters
	logMu     sync.Mutex
	logAt     time.Time
	logN      uint64
	self      selfState // owned by the ticking goroutine, then by Close
}

// NewRelay opens the listeners and the publication and starts reading.
// The listeners open first: an address that is taken (another StatsD
// agent on 8125, another relay's retransmit port) fails with a
// *ListenError before anything is published.
func NewRelay(cfg RelayConfig) (*Relay, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	r := &Relay{cfg: cfg}
	r.ctx, r.cancel = context.WithCancel(context.Background())
	if err := r.open(); err != nil {
		r.closeAll()
		return nil, err
	}
	if r.udp != nil {
		r.wg.Add(1)
		go r.readUDP()
	}
	if r.unix != nil {
		r.wg.Add(1)
		go r.readUnix()
	}
	r.wg.Add(1)
	go r.runTicks()
	return r, nil
}

// open opens the sockets and the publication; on error, closeAll releases
// what was opened.
func (r *Relay) open() error {
	cfg := r.cfg
	var err error
	if !cfg.NoUDP {
		r.udp, err = sock.Open(sock.Config{Local: cfg.Listen, ReadBuffer: cfg.ReadBuffer})
		if err != nil {
			return &ListenError{What: "udp", Addr: cfg.Listen.String(), Err: err}
		}
	}
	if cfg.Unix != "" {
		if r.unix, err = listenUnixgram(cfg.Unix); err != nil {
			return err
		}
		r.unix.SetReadBuffer(cfg.ReadBuffer)
	}
	if cfg.Retransmit.IsValid() {
		cache := retransmit.NewCache(cfg.Cache)
		r.srv, err = retransmit.NewServer(retransmit.ServerConfig{Listen: cfg.Retransmit, Sources: []retransmit.Source{cache},
			Interface: cfg.Bus.Interface, Logger: cfg.Logger})
		if err != nil {
			return &ListenError{What: "retransmit", Addr: cfg.Retransmit.String(), Err: err}
		}
		cfg.Bus.Sinks = append(append([]publisher.Sink(nil), cfg.Bus.Sinks...), cache)
	}
	r.pub, err = publisher.New(cfg.Bus)
	if err != nil {
		return fmt.Errorf("statsd: relay: %w", err)
	}
	r.em = newEmitter(r.pub, cfg.MaxMessageLen, cfg.Now)
	r.cfg.Limits = r.em.clampLimits(cfg.Limits)
	return nil
}

// listenUnixgram listens on a Unix datagram socket at path. A socket file
// left by a relay that is gone is replaced; one that a running process
// still reads is not: that is a *ListenError wrapping EADDRINUSE.
func listenUnixgram(path string) (*net.UnixConn, error) {
	addr := &net.UnixAddr{Name: path, Net: "unixgram"}
	if fi, err := os.Lstat(path); err == nil {
		if fi.Mode()&os.ModeSocket == 0 {
			return nil, &ListenError{What: "unix", Addr: path, Err: errNotSocket}
		}
		if c, err := net.DialUnix("unixgram", nil, addr); err == nil {
			c.Close()
			return nil, &ListenError{What: "unix", Addr: path, Err: syscall.EADDRINUSE}
		}
		os.Remove(path)
	}
	c, err := net.ListenUnixgram("unixgram", addr)
	if err != nil {
		return nil, &ListenError{What: "unix", Addr: path, Err: err}
	}
	return c, nil
}

var errNotSocket = errors.New("a file that is not a socket is in the way (not removed)")

// ListenError is returned by NewRelay and NewClient when a socket they
// need cannot be opened. Test for a taken address with
// errors.Is(err, syscall.EADDRINUSE).
type ListenError struct {
	// What is the socket: "udp" (StatsD clients), "unix" (StatsD clients
	// on a Unix socket) or "retransmit" (the collectors' re-requests).
	What string
	// Addr is the address or path asked for.
	Addr string
	Err  error
}

func (e *ListenError) Error() string {
	if errors.Is(e.Err, syscall.EADDRINUSE) {
		return fmt.Sprintf("statsd: %s %s is already in use by another process", e.What, e.Addr)
	}
	return fmt.Sprintf("statsd: %s %s: %v", e.What, e.Addr, e.Err)
}

func (e *ListenError) Unwrap() error { return e.Err }

// Addr is the UDP address the relay listens on (its port resolved).
func (r *Relay) Addr() netip.AddrPort {
	if r.udp == nil {
		return netip.AddrPort{}
	}
	return r.udp.LocalAddr()
}

// RetransmitAddr is the address of the retransmit server, if running.
func (r *Relay) RetransmitAddr() netip.AddrPort {
	if r.srv == nil {
		return netip.AddrPort{}
	}
	return r.srv.Addr()
}

// Publication is the relay's bus publication.
func (r *Relay) Publication() *publisher.Publication { return r.pub }

// Stats returns the relay's counters.
func (r *Relay) Stats() RelayStats {
	s := RelayStats{
		Datagrams: r.st.datagrams.Load(), Bytes: r.st.bytes.Load(), Metrics: r.st.metrics.Load(),
		KernelDrops: r.st.kernelDrops.Load(), ReadErrors: r.st.readErrors.Load(),
	}
	for i := range s.Bad {
		s.Bad[i] = r.st.bad[i].Load()
		s.BadTotal += s.Bad[i]
	}
	r.em.mu.Lock()
	s.Messages, s.PublishErrors = r.em.msgs, r.em.errs
	r.em.mu.Unlock()
	return s
}

// Close stops the listeners, publishes what is pending, ends the bus
// session and stops the retransmit server. A second Close waits for the
// first and returns ErrClosed.
func (r *Relay) Close() error {
	err := ErrClosed
	r.closeOnce.Do(func() { err = r.close() })
	return err
}

func (r *Relay) close() error {
	r.cancel()
	if r.udp != nil {
		r.udp.SetReadDeadline(time.Now())
	}
	if r.unix != nil {
		r.unix.SetReadDeadline(time.Now())
	}
	r.wg.Wait()
	r.publishSelf(&r.self)
	return r.closeAll()
}

func (r *Relay) closeAll() error {
	r.cancel()
	var errs []error
	if r.udp != nil {
		errs = append(errs, r.udp.Close())
	}
	if r.unix != nil {
		errs = append(errs, r.unix.Close())
		os.Remove(r.cfg.Unix)
	}
	if r.pub != nil {
		errs = append(errs, r.pub.Close())
	}
	if r.srv != nil {
		// Closed after the publication, whose Close waited Bus.Grace
		// with this server still answering the tail's re-requests.
		errs = append(errs, r.srv.Close())
	}
	return errors.Join(errs...)
}

// lineReader turns datagrams into published metrics; one per listener
// goroutine.
type lineReader struct {
	r     *Relay
	p     *Parser
	m     Metric
	b     *builder
	agg   *preAgg
	lastK uint32
}

func (r *Relay) newLineReader() *lineReader {
	lr := &lineReader{r: r, p: NewParser(r.cfg.Limits), b: newBuilder(r.em)}
	if r.cfg.PreAggregate > 0 {
		lr.agg = newPreAgg()
	}
	return lr
}

// datagram handles one datagram. It allocates nothing unless a line is
// refused and logged, or a pre-aggregation key is new.
func (lr *lineReader) datagram(d []byte, truncated bool) {
	st := &lr.r.st
	st.datagrams.Add(1)
	st.bytes.Add(uint64(len(d)))
	lr.p.Reset(d, truncated)
	var good uint64
	for {
		ok, reason := lr.p.Next(&lr.m)
		if !ok {
			break
		}
		if reason == ReasonNone && bytes.HasPrefix(lr.m.Name, selfPrefixBytes) {
			reason = ReasonReservedName
		}
		taken := false
		if reason == ReasonNone && lr.agg != nil {
			taken, reason = lr.agg.add(&lr.m)
		}
		if reason != ReasonNone {
			st.bad[reason].Add(1)
			lr.r.logBad(reason, lr.m.Line)
			continue
		}
		good++
		if taken {
			continue
		}
		if lr.m.Part {
			lr.b.add(lr.m.Name, colon, lr.m.Line)
		} else {
			lr.b.add(lr.m.Line)
		}
	}
	st.metrics.Add(good)
}

var colon = []byte{':'}

func (lr *lineReader) flushAgg(force bool) {
	if lr.agg != nil && (force || lr.agg.due(lr.r.cfg.PreAggregate)) {
		lr.agg.emit(lr.b)
	}
	lr.b.flush()
}

func (r *Relay) logBad(reason Reason, line []byte) {
	r.logMu.Lock()
	defer r.logMu.Unlock()
	now := time.Now()
	if now.Sub(r.logAt) < r.cfg.LogEvery {
		r.logN++
		return
	}
	r.cfg.Logger.Warn("statsd relay: refused line", "reason", reason.String(), "line", string(line[:min(len(line), 200)]),
		"not_logged_since_last", r.logN)
	r.logAt, r.logN = now, 0
}

func (r *Relay) readUDP() {
	defer r.wg.Done()
	lr := r.newLineReader()
	b := sock.NewBatch(r.cfg.BatchSize, r.cfg.DatagramSize)
	for r.ctx.Err() == nil {
		r.udp.SetReadDeadline(lr.deadline())
		n, err := r.udp.ReadBatch(b)
		if d := b.Drops; d != lr.lastK {
			r.st.kernelDrops.Add(uint64(d - lr.lastK))
			lr.lastK = d
		}
		for i := range n {
			lr.datagram(b.Msgs[i].Buf, b.Msgs[i].Truncated)
		}
		if err != nil && !sock.IsTimeout(err) && r.readFailed("statsd relay: read udp", err) {
			break
		}
		lr.flushAgg(false)
	}
	lr.flushAgg(true)
}

func (lr *lineReader) deadline() time.Time {
	if lr.agg == nil {
		return time.Time{}
	}
	return lr.agg.start.Add(lr.r.cfg.PreAggregate)
}

func (r *Relay) readUnix() {
	defer r.wg.Done()
	lr := r.newLineReader()
	buf := make([]byte, r.cfg.DatagramSize+1)
	for r.ctx.Err() == nil {
		r.unix.SetReadDeadline(lr.deadline())
		n, err := r.unix.Read(buf)
		if n > 0 {
			trunc := n > r.cfg.DatagramSize
			lr.datagram(buf[:min(n, r.cfg.DatagramSize)], trunc)
		}
		if err != nil && !isTimeout(err) && r.readFailed("statsd relay: read unix", err) {
			break
		}
		lr.flushAgg(false)
	}
	lr.flushAgg(true)
}

// readFailed counts and logs (as msg) a read error that is not a
// timeout, and pauses so that a socket that fails at once does not spin;
// stop says the relay is closing, which explains the error.
func (r *Relay) readFailed(msg string, err error) (stop bool) {
	if r.ctx.Err() != nil {
		return true
	}
	r.st.readErrors.Add(1)
	r.cfg.Logger.Error(msg, "err", err)
	time.Sleep(10 * time.Millisecond)
	return false
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

func (r *Relay) runTicks() {
	defer r.wg.Done()
	r.self.at = time.Now()
	r.em.runTicks(r.ctx, r.cfg.TickInterval, func() {
		if r.cfg.SelfInterval > 0 && time.Since(r.self.at) >= r.cfg.SelfInterval {
			r.publishSelf(&r.self)
		}
	})
}

// selfState remembers the counters last published, to publish deltas.
type selfState struct {
	at                            time.Time
	datagrams, metrics, kernDrops uint64
	bad                           [NumReasons]uint64
}

// publishSelf publishes the relay's counters since the last call as
// counter lines, so every collector sees them.
func (r *Relay) publishSelf(s *selfState) {
	if r.cfg.SelfInterval < 0 || r.pub == nil {
		return
	}
	st := r.Stats()
	b := newBuilder(r.em)
	num := make([]byte, 0, 24)
	put := func(name string, v uint64, tag string) {
		if v == 0 {
			return
		}
		num = strconv.AppendUint(num[:0], v, 10)
		if tag == "" {
			b.add([]byte(SelfPrefix+"relay."+name+":"), num, []byte("|c"))
		} else {
			b.add([]byte(SelfPrefix+"relay."+name+":"), num, []byte("|c|#"+tag))
		}
	}
	put("datagrams", st.Datagrams-s.datagrams, "")
	put("metrics", st.Metrics-s.metrics, "")
	put("kernel_drops", st.KernelDrops-s.kernDrops, "")
	for i := Reason(1); i < NumReasons; i++ {
		put("bad_lines", st.Bad[i]-s.bad[i], "reason:"+i.String())
	}
	b.flush()
	s.at, s.datagrams, s.metrics, s.kernDrops, s.bad = time.Now(), st.Datagrams, st.Metrics, st.KernelDrops, st.Bad
}

var _ io.Closer = (*Relay)(nil)
