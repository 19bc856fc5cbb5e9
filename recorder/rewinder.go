package recorder

import (
	"cmp"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"sync"
	"time"

	"github.com/mdbus/mdbus/internal/monotime"
	"github.com/mdbus/mdbus/internal/sock"
	"github.com/mdbus/mdbus/journal"
	"github.com/mdbus/mdbus/nak"
	"github.com/mdbus/mdbus/packetconn"
	"github.com/mdbus/mdbus/retransmit"
	"github.com/mdbus/mdbus/subscriber"
	"github.com/mdbus/mdbus/wire"
)

// DefaultRewinderReadBuffer is RewinderConfig.ReadBuffer when zero: at
// 50,000 small packets/s (about 2.3 KiB of kernel memory each on lo) it
// holds some 300 ms of feed. Granted in full when the process may use
// SO_RCVBUFFORCE (CAP_NET_ADMIN), else capped by net.core.rmem_max.
const DefaultRewinderReadBuffer = 32 << 20

// RewinderConfig configures a Rewinder. Feed and Server.Listen are
// required; zero and negative values follow Config's rule.
type RewinderConfig struct {
	// Feed is the multicast group:port of the feed to cache.
	Feed netip.AddrPort
	// Interface to join the feed on; default "lo".
	Interface string
	// Source makes the join source-specific when valid.
	Source netip.Addr
	// ReadBuffer is the feed socket's SO_RCVBUF request; default
	// DefaultRewinderReadBuffer. Without an Upstream the rewinder has
	// nobody to ask for what it misses, so it gets more room than a
	// subscriber (whose default is 4 MiB) to ride out a scheduling stall:
	// a datagram the kernel drops and nobody repairs restarts the
	// session's cached range.
	ReadBuffer int
	// Upstream, when valid, is the retransmitter (the publisher's
	// re-request server or another rewinder) the rewinder asks for what
	// its own feed socket missed, so its history has no holes: a kernel
	// drop costs a re-request, not the cached range.
	Upstream netip.AddrPort
	// UpstreamBackups are asked in turn when Upstream stops answering
	// (see subscriber.Config.Recovery.Backups), and for what it could not fill
	// after a restart.
	UpstreamBackups []netip.AddrPort
	// NAK tunes the re-requests to Upstream (see subscriber.Config.Recovery.NAK);
	// its Deadline defaults to DefaultNAKDeadline.
	NAK nak.Config
	// Journal, when not nil, receives every message the rewinder
	// delivers (one journal incarnation per stream incarnation, stamped
	// with the receive time), and the server answers ranges that fell out
	// of the cache from it. The caller opens and closes it.
	Journal *journal.Journal
	// Cache bounds the cached history.
	Cache retransmit.CacheConfig
	// Server configures the re-request server; its Sources are set by
	// the rewinder (the cache first, then the Journal, then any given
	// here).
	Server retransmit.ServerConfig
	// Wrap, when set, wraps the feed socket (tests stall or impair it).
	Wrap func(packetconn.PacketConn) packetconn.PacketConn
	// Heartbeat is how long a session may be silent on the feed before
	// the rewinder multicasts a heartbeat for it on Server.RepairGroup,
	// and how often it repeats it: default 1 s; negative: none. Only
	// with a RepairGroup. See Rewinder for why.
	Heartbeat time.Duration
	Logger    *slog.Logger
}

// Rewinder subscribes to a feed, caches every message it delivers and
// answers re-requests from that cache, so repairs outlive the publisher:
// when a publisher crashes, subscribers still recover every message that
// reached the wire before it died.
//
// The rewinder joins live: the first packet it hears starts each session's
// history. Start it before the publisher to hold a session from sequence 1.
// Messages reach the cache in order, once each (the subscriber's
// guarantee). A range the rewinder itself misses is asked for again from
// Upstream when one is configured; only a range that nobody can repair
// restarts that session's cached range (see retransmit.Cache).
//
// # Heartbeats for a silent session
//
// Subscribers find tail loss through the publisher's heartbeats. When the
// publisher dies, its heartbeats stop, and a subscriber that missed the
// last packets would never learn of them. So when a session has been silent
// on the feed for Heartbeat, the rewinder multicasts a MoldUDP64 heartbeat
// for it on the repair group, carrying the next sequence it holds, and
// repeats it every Heartbeat. Subscribers that join the repair group treat
// it as a repair-path heartbeat: a gap if they are behind, nothing
// otherwise.
type Rewinder struct {
	cache *retransmit.Cache
	sub   *subscriber.Subscriber
	srv   *retransmit.Server
	tap   *tap // nil without a Journal

	mu       sync.Mutex
	sessions map[wire.Session]*rewound
	hbConn   *sock.Conn
	hbGroup  netip.AddrPort
	hbEvery  time.Duration
	stop     chan struct{}
	wg       sync.WaitGroup
	closed   bool
}

type rewound struct {
	stream subscriber.StreamID // the incarnation the cache holds
	next   wire.Seq
	last   monotime.Time
}

// NewRewinder starts a rewinder.
func NewRewinder(cfg RewinderConfig) (*Rewinder, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	r := &Rewinder{cache: retransmit.NewCache(cfg.Cache), sessions: map[wire.Session]*rewound{}, stop: make(chan struct{})}
	srvCfg := cfg.Server
	srvCfg.Sources = []retransmit.Source{r.cache}
	if cfg.Journal != nil {
		r.tap = newTap(cfg.Journal, orDiscard(cfg.Logger))
		r.tap.setUpstreams(cfg.Upstream, cfg.UpstreamBackups)
		srvCfg.Sources = append(srvCfg.Sources, cfg.Journal)
	}
	srvCfg.Sources = append(srvCfg.Sources, cfg.Server.Sources...)
	if srvCfg.Logger == nil {
		srvCfg.Logger = cfg.Logger
	}
	srv, err := retransmit.NewServer(srvCfg)
	if err != nil {
		return nil, fmt.Errorf("recorder: rewinder: %w", err)
	}
	r.srv = srv
	sub, err := subscriber.New(subscriber.Config{
		Group: cfg.Feed, Interface: cfg.Interface, Source: cfg.Source, Logger: cfg.Logger,
		Wrap:      cfg.Wrap,
		Recovery:  subscriber.Recovery{Retransmitter: cfg.Upstream, Backups: cfg.UpstreamBackups, NAK: cfg.NAK},
		Receive:   subscriber.Receive{ReadBuffer: cfg.ReadBuffer},
		OnMessage: r.onMessage,
		OnEnd:     r.onEnd,
	})
	if err != nil {
		srv.Close()
		return nil, fmt.Errorf("recorder: rewinder: %w", err)
	}
	r.sub = sub
	r.hbEvery = cfg.Heartbeat
	if g := cfg.Server.RepairGroup; g.IsValid() && r.hbEvery > 0 {
		if err := r.startHeartbeats(g, cfg.Server.Interface, cfg.Server.TTL); err != nil {
			r.Close()
			return nil, fmt.Errorf("recorder: rewinder: %w", err)
		}
	}
	return r, nil
}

// withDefaults checks c and returns it with the rewinder's own defaults
// applied (the subscriber, cache and server fill in the rest).
func (c RewinderConfig) withDefaults() (RewinderConfig, error) {
	if !c.Feed.IsValid() {
		return c, fmt.Errorf("%w: rewinder: no feed group", ErrConfig)
	}
	if err := checkFeed(c.ReadBuffer, c.NAK); err != nil {
		return c, err
	}
	if err := c.Cache.Validate(); err != nil {
		return c, fmt.Errorf("%w: rewinder: %w", ErrConfig, err)
	}
	c.ReadBuffer = cmp.Or(c.ReadBuffer, DefaultRewinderReadBuffer)
	if c.NAK.Deadline == 0 && c.Upstream.IsValid() {
		c.NAK.Deadline = DefaultNAKDeadline
	}
	c.Heartbeat = cmp.Or(c.Heartbeat, time.Second)
	return c, nil
}

func (r *Rewinder) onEnd(id subscriber.StreamID, next wire.Seq) {
	if r.tap != nil {
		r.tap.end(id, next)
	}
}

func (r *Rewinder) onMessage(m subscriber.Message) {
	r.mu.Lock()
	rw := r.sessions[m.Stream.Session]
	if rw != nil && rw.stream != m.Stream {
		// A new incarnation of the session (a publisher restarted under
		// the same name): the cache drops the old one, whose bytes must
		// never answer the new one's re-requests.
		r.cache.Restart(m.Stream.Session, m.Seq)
	}
	if rw == nil && len(r.sessions) < maxRewoundSessions {
		rw = &rewound{}
		r.sessions[m.Stream.Session] = rw
	}
	if rw != nil {
		rw.stream, rw.next, rw.last = m.Stream, m.Seq+1, monotime.Now()
	}
	r.mu.Unlock()
	r.cache.Add(m.Stream.Session, m.Seq, m.Data)
	if r.tap != nil {
		r.tap.message(m)
	}
}

// maxRewoundSessions bounds the sessions the rewinder heartbeats for.
const maxRewoundSessions = 1024

func (r *Rewinder) startHeartbeats(group netip.AddrPort, ifname string, ttl int) error {
	if ifname == "" {
		ifname = "lo"
	}
	ifi, err := net.InterfaceByName(ifname)
	if err != nil {
		return fmt.Errorf("heartbeat interface %q: %w", ifname, err)
	}
	local := netip.AddrPortFrom(netip.IPv4Unspecified(), 0)
	if group.Addr().Is6() {
		local = netip.AddrPortFrom(netip.IPv6Unspecified(), 0)
	}
	c, err := sock.Open(sock.Config{Local: local, Interface: ifi, TTL: ttl, Loopback: true, SendOnly: true})
	if err != nil {
		return fmt.Errorf("heartbeat socket: %w", err)
	}
	r.hbConn, r.hbGroup = c, group
	r.wg.Add(1)
	go r.heartbeats()
	return nil
}

// heartbeats runs on its own goroutine, owned by the Rewinder.
func (r *Rewinder) heartbeats() {
	defer r.wg.Done()
	t := time.NewTicker(r.hbEvery)
	defer t.Stop()
	var buf []byte
	for {
		select {
		case <-r.stop:
			return
		case <-t.C:
		}
		now := monotime.Now()
		r.mu.Lock()
		for s, rw := range r.sessions {
			if now.Sub(rw.last) >= r.hbEvery {
				buf = wire.AppendHeartbeat(buf[:0], s, rw.next)
				_ = r.hbConn.WriteTo(buf, r.hbGroup) // best effort; the next tick retries
			}
		}
		r.mu.Unlock()
	}
}

// Addr is where re-requests go.
func (r *Rewinder) Addr() netip.AddrPort { return r.srv.Addr() }

// Cache is the rewinder's cache.
func (r *Rewinder) Cache() *retransmit.Cache { return r.cache }

// ServerStats are the server's counters.
func (r *Rewinder) ServerStats() retransmit.ServerStats { return r.srv.Stats() }

// JournalStats are the journal writes' counters and the first journal
// error (zero and nil without a Journal).
func (r *Rewinder) JournalStats() (TapStats, error) {
	if r.tap == nil {
		return TapStats{}, nil
	}
	return r.tap.stats()
}

// FeedStats are the feed subscriber's counters.
func (r *Rewinder) FeedStats() subscriber.Stats { return r.sub.Stats() }

// Close stops the feed subscriber, the server and the heartbeats, and
// waits for all of them. Later calls return ErrClosed.
func (r *Rewinder) Close() error {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return ErrClosed
	}
	r.closed = true
	r.mu.Unlock()
	close(r.stop)
	r.wg.Wait()
	var errs []error
	if r.sub != nil {
		errs = append(errs, r.sub.Close())
	}
	if r.tap != nil {
		errs = append(errs, r.tap.close())
	}
	errs = append(errs, r.srv.Close())
	if r.hbConn != nil {
		errs = append(errs, r.hbConn.Close())
	}
	return errors.Join(errs...)
}
