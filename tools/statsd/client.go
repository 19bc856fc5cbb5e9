package statsd

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"net/netip"
	"strconv"
	"sync"
	"time"

	"github.com/mdbus/mdbus/internal/cfgcheck"
	"github.com/mdbus/mdbus/publisher"
	"github.com/mdbus/mdbus/retransmit"
)

// ClientConfig configures a Client. Bus.Group is required; zero and
// negative values follow RelayConfig's rule.
type ClientConfig struct {
	// Bus is the publication's config (Group required). A zero Linger is
	// DefaultLinger.
	Bus publisher.Config
	// Retransmit, when valid, runs a retransmit cache and server on this
	// unicast address, as the relay does.
	Retransmit netip.AddrPort
	Cache      retransmit.CacheConfig
	// Limits check every line.
	Limits Limits
	// FlushEvery is the longest a metric waits in the client's message
	// buffer; default 1 ms.
	FlushEvery time.Duration
	// TickInterval is the clock tick period, as RelayConfig.TickInterval;
	// default DefaultTickInterval.
	TickInterval time.Duration
	// MaxMessageLen bounds one bus message; default DefaultMaxMessageLen.
	MaxMessageLen int
	// Now is the clock in Unix nanoseconds; default time.Now().UnixNano().
	Now func() int64
}

// Client publishes metrics onto the bus directly, without a UDP hop: the
// messages are those a Relay publishes, so a Collector cannot tell them
// apart. Its methods are safe for concurrent use.
type Client struct {
	cfg       ClientConfig
	pub       *publisher.Publication
	srv       *retransmit.Server
	em        *emitter
	mu        sync.Mutex
	b         *builder
	p         *Parser
	m         Metric
	line      []byte
	closed    bool
	closeOnce sync.Once
	cancel    context.CancelFunc
	wg        sync.WaitGroup
}

// withDefaults checks c and returns it with defaults applied.
func (c ClientConfig) withDefaults() (ClientConfig, error) {
	if err := c.Limits.check(cfgcheck.F("FlushEvery", c.FlushEvery),
		cfgcheck.F("TickInterval", c.TickInterval), cfgcheck.F("MaxMessageLen", c.MaxMessageLen)); err != nil {
		return c, err
	}
	if err := c.Cache.Validate(); err != nil {
		return c, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	if c.Bus.Linger == 0 && !c.Bus.Inline {
		c.Bus.Linger = DefaultLinger
	}
	c.FlushEvery = cmp.Or(c.FlushEvery, time.Millisecond)
	c.TickInterval = cmp.Or(c.TickInterval, DefaultTickInterval)
	return c, nil
}

// NewClient opens the publication and starts the clock ticks.
func NewClient(cfg ClientConfig) (*Client, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	c := &Client{cfg: cfg, p: NewParser(cfg.Limits)}
	if cfg.Retransmit.IsValid() {
		cache := retransmit.NewCache(cfg.Cache)
		srv, err := retransmit.NewServer(retransmit.ServerConfig{Listen: cfg.Retransmit, Sources: []retransmit.Source{cache},
			Interface: cfg.Bus.Interface})
		if err != nil {
			return nil, &ListenError{What: "retransmit", Addr: cfg.Retransmit.String(), Err: err}
		}
		c.srv = srv
		cfg.Bus.Sinks = append(append([]publisher.Sink(nil), cfg.Bus.Sinks...), cache)
	}
	pub, err := publisher.New(cfg.Bus)
	if err != nil {
		if c.srv != nil {
			c.srv.Close()
		}
		return nil, fmt.Errorf("statsd: client: %w", err)
	}
	c.pub = pub
	c.em = newEmitter(pub, cfg.MaxMessageLen, cfg.Now)
	c.p = NewParser(c.em.clampLimits(cfg.Limits))
	c.b = newBuilder(c.em)
	ctx, cancel := context.WithCancel(context.Background())
	c.cancel = cancel
	c.wg.Add(2)
	go func() {
		defer c.wg.Done()
		c.em.runTicks(ctx, cfg.TickInterval, nil)
	}()
	go func() {
		defer c.wg.Done()
		t := time.NewTicker(cfg.FlushEvery)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				c.Flush()
			}
		}
	}()
	return c, nil
}

// RetransmitAddr is the retransmit server's address, if running.
func (c *Client) RetransmitAddr() netip.AddrPort {
	if c.srv == nil {
		return netip.AddrPort{}
	}
	return c.srv.Addr()
}

// Publication is the client's bus publication.
func (c *Client) Publication() *publisher.Publication { return c.pub }

// Line publishes one or more StatsD lines, as a relay would receive them
// in a datagram. Refused lines are not published; the first refusal is
// returned (wrapping ErrBadLine) after the valid lines were queued.
func (c *Client) Line(lines []byte) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lineLocked(lines)
}

func (c *Client) lineLocked(lines []byte) error {
	if c.closed {
		return ErrClosed
	}
	c.p.Reset(lines, false)
	var first error
	for {
		ok, r := c.p.Next(&c.m)
		if !ok {
			return first
		}
		if r == ReasonNone && bytes.HasPrefix(c.m.Name, selfPrefixBytes) {
			r = ReasonReservedName
		}
		if r != ReasonNone {
			if first == nil {
				first = fmt.Errorf("%w: %s: %.80q", ErrBadLine, r, c.m.Line)
			}
			continue
		}
		var err error
		if c.m.Part {
			_, err = c.b.add(c.m.Name, colon, c.m.Line)
		} else {
			_, err = c.b.add(c.m.Line)
		}
		if err != nil && first == nil {
			first = err
		}
	}
}

// ErrBadLine wraps the reason a line given to Client was refused.
var ErrBadLine = fmt.Errorf("statsd: line refused")

func (c *Client) metric(name string, v float64, code string, rate float64, tags []string) error {
	c.mu.Lock()
	l := append(append(c.line[:0], name...), ':')
	l = strconv.AppendFloat(l, v, 'g', -1, 64)
	c.line = appendSuffix(l, code, rate, tags)
	defer c.mu.Unlock()
	return c.lineLocked(c.line)
}

func appendSuffix(l []byte, code string, rate float64, tags []string) []byte {
	l = append(append(l, '|'), code...)
	if rate > 0 && rate < 1 {
		l = strconv.AppendFloat(append(l, "|@"...), rate, 'g', -1, 64)
	}
	for i, t := range tags {
		if i == 0 {
			l = append(l, "|#"...)
		} else {
			l = append(l, ',')
		}
		l = append(l, t...)
	}
	return l
}

// Count adds v to a counter. Tags are "key:value" or "key".
func (c *Client) Count(name string, v float64, tags ...string) error {
	return c.metric(name, v, "c", 1, tags)
}

// CountSampled adds v to a counter sampled at rate (0 < rate <= 1).
func (c *Client) CountSampled(name string, v, rate float64, tags ...string) error {
	return c.metric(name, v, "c|@"+strconv.FormatFloat(rate, 'g', -1, 64), 1, tags)
}

// Gauge sets a gauge to v (v >= 0; use GaugeDelta to go below zero).
func (c *Client) Gauge(name string, v float64, tags ...string) error {
	if v < 0 {
		if err := c.metric(name, 0, "g", 1, tags); err != nil {
			return err
		}
	}
	return c.metric(name, v, "g", 1, tags)
}

// GaugeDelta changes a gauge by d.
func (c *Client) GaugeDelta(name string, d float64, tags ...string) error {
	c.mu.Lock()
	l := append(append(c.line[:0], name...), ':')
	if d >= 0 {
		l = append(l, '+')
	}
	l = strconv.AppendFloat(l, d, 'g', -1, 64)
	c.line = appendSuffix(l, "g", 1, tags)
	defer c.mu.Unlock()
	return c.lineLocked(c.line)
}

// Timing records a timer value in milliseconds.
func (c *Client) Timing(name string, ms float64, tags ...string) error {
	return c.metric(name, ms, "ms", 1, tags)
}

// Histogram records a histogram value.
func (c *Client) Histogram(name string, v float64, tags ...string) error {
	return c.metric(name, v, "h", 1, tags)
}

// Distribution records a distribution value.
func (c *Client) Distribution(name string, v float64, tags ...string) error {
	return c.metric(name, v, "d", 1, tags)
}

// Set adds member to a set.
func (c *Client) Set(name, member string, tags ...string) error {
	c.mu.Lock()
	l := append(append(append(c.line[:0], name...), ':'), member...)
	c.line = appendSuffix(l, "s", 1, tags)
	defer c.mu.Unlock()
	return c.lineLocked(c.line)
}

// Flush publishes the buffered metrics now.
func (c *Client) Flush() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return ErrClosed
	}
	return c.b.flush()
}

// Close publishes what is buffered, ends the bus session and stops the
// retransmit server after a grace of one tick interval. A second Close
// waits for the first and returns ErrClosed.
func (c *Client) Close() error {
	err := ErrClosed
	c.closeOnce.Do(func() { err = c.close() })
	return err
}

func (c *Client) close() error {
	c.mu.Lock()
	err := c.b.flush()
	c.closed = true
	c.mu.Unlock()
	c.cancel()
	c.wg.Wait()
	if cerr := c.pub.Close(); err == nil {
		err = cerr
	}
	if c.srv != nil {
		// The publication's Close (above) waited its Grace with this
		// server still answering re-requests for the tail.
		c.srv.Close()
	}
	return err
}
