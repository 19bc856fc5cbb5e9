package recorder

import (
	"cmp"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"sync"
	"time"

	"github.com/mdbus/mdbus/internal/cfgcheck"
	"github.com/mdbus/mdbus/journal"
	"github.com/mdbus/mdbus/nak"
	"github.com/mdbus/mdbus/packetconn"
	"github.com/mdbus/mdbus/subscriber"
	"github.com/mdbus/mdbus/wire"
)

// DefaultNAKDeadline is how long a Recorder, or a Rewinder with an
// Upstream, keeps asking for a missing range before it gives it up: ten
// times a subscriber's default, since a recorder's history matters more
// than its latency, and a range given up splits the journal into two
// incarnations.
const DefaultNAKDeadline = 10 * time.Second

// Config configures a Recorder. Feed and Journal are required.
//
// One rule for the values of every field, here and in RewinderConfig
// (and in the subscriber and nak settings they pass on): the zero value
// means the default. A negative value means "none" or "off" only for the
// fields whose doc says "negative:" (MaxStreamsPerSource; a
// RewinderConfig's Heartbeat); for every other field a negative value is
// invalid and NewRecorder or NewRewinder returns an error wrapping
// ErrConfig that names it.
type Config struct {
	// Feed is the multicast group:port to record.
	Feed netip.AddrPort
	// Interface to join the feed on; default "lo".
	Interface string
	// Source makes the join source-specific when valid.
	Source netip.Addr
	// ReadBuffer is the feed socket's SO_RCVBUF request; default
	// DefaultRewinderReadBuffer (the recorder, like the rewinder, should
	// ride out a stall without asking anybody).
	ReadBuffer int
	// Upstream, when valid, is the retransmitter asked for whatever the
	// recorder's own socket missed, so the journal has no holes.
	Upstream netip.AddrPort
	// UpstreamBackups are asked in turn when Upstream stops answering
	// (see subscriber.Config.Recovery.Backups), and for what it could not fill
	// after a restart.
	UpstreamBackups []netip.AddrPort
	// RepairGroup, when valid, is the repair group joined as well (with
	// Upstream: repairs multicast there fill the recorder's holes too).
	RepairGroup netip.AddrPort
	// StartSeq is the first sequence recorded of every stream: 0 joins
	// live (the first packet heard starts the recording), 1 records each
	// session from its start, fetching what came before the join from
	// Upstream (within subscriber.Config.Limits.MaxGap and NAK.MaxPending).
	StartSeq wire.Seq
	// MaxStreams and MaxStreamsPerSource bound the streams recorded at
	// once (see subscriber.Config: defaults 64 and 16 per source address;
	// MaxStreamsPerSource negative: none, no such bound). Packets of a stream beyond
	// them are not journaled: Stats counts them (RefusedPackets).
	MaxStreams, MaxStreamsPerSource int
	// NAK tunes the re-requests to Upstream (see subscriber.Config.Recovery.NAK);
	// its Deadline defaults to DefaultNAKDeadline.
	NAK nak.Config
	// Journal receives the recording. The caller opens and closes it.
	Journal *journal.Journal
	// Wrap, when set, wraps the feed socket (tests stall or impair it).
	Wrap func(packetconn.PacketConn) packetconn.PacketConn
	// Logger receives warnings; default slog.Default() for the feed
	// subscriber, discard for the recorder's own messages.
	Logger *slog.Logger
}

// Recorder subscribes to a feed and journals every stream it hears: one
// journal incarnation per stream incarnation (a new source port, a
// sequence restart, the stream after an end of session), each record
// stamped with its receive time. With an Upstream it asks for what it
// missed, so what it journals is every message of each stream from its
// first, in order, once.
//
// A recorder restarted over the same journal continues each live stream's
// newest incarnation (same session and source, not ended), fetching the
// messages it missed while it was down from Upstream first; without an
// Upstream, or when the fetch fails, the stream gets a new incarnation.
//
// A range that nobody could repair (declared lost by the subscriber)
// cannot be journaled: the recording continues in a new incarnation after
// it, and Stats counts it (Restarts).
type Recorder struct {
	sub *subscriber.Subscriber
	tap *tap

	mu     sync.Mutex
	closed bool
}

// NewRecorder starts a recorder.
func NewRecorder(cfg Config) (*Recorder, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	r := &Recorder{tap: newTap(cfg.Journal, orDiscard(cfg.Logger))}
	r.tap.setUpstreams(cfg.Upstream, cfg.UpstreamBackups)
	sub, err := subscriber.New(subscriber.Config{
		Group: cfg.Feed, Interface: cfg.Interface, Source: cfg.Source, Logger: cfg.Logger,
		StartSeq: cfg.StartSeq, Wrap: cfg.Wrap,
		Recovery:  subscriber.Recovery{Retransmitter: cfg.Upstream, Backups: cfg.UpstreamBackups, RepairGroup: cfg.RepairGroup, NAK: cfg.NAK},
		Receive:   subscriber.Receive{ReadBuffer: cfg.ReadBuffer},
		Limits:    subscriber.Limits{MaxStreams: cfg.MaxStreams, MaxStreamsPerSource: cfg.MaxStreamsPerSource},
		OnMessage: r.tap.message,
		OnEnd:     r.tap.end,
	})
	if err != nil {
		return nil, fmt.Errorf("recorder: %w", err)
	}
	r.sub = sub
	return r, nil
}

// withDefaults checks c and returns it with the recorder's own defaults
// applied (the subscriber fills in the rest).
func (c Config) withDefaults() (Config, error) {
	if !c.Feed.IsValid() {
		return c, fmt.Errorf("%w: no feed group", ErrConfig)
	}
	if c.Journal == nil {
		return c, fmt.Errorf("%w: no journal", ErrConfig)
	}
	if err := checkFeed(c.ReadBuffer, c.NAK, cfgcheck.F("MaxStreams", c.MaxStreams)); err != nil {
		return c, err
	}
	c.ReadBuffer = cmp.Or(c.ReadBuffer, DefaultRewinderReadBuffer)
	c.NAK.Deadline = cmp.Or(c.NAK.Deadline, DefaultNAKDeadline)
	return c, nil
}

// checkFeed refuses, by name, a negative value among the feed settings a
// Recorder and a Rewinder share (and more of the caller's own).
func checkFeed(readBuffer int, n nak.Config, more ...cfgcheck.Field) error {
	if err := cfgcheck.Negative(ErrConfig, append([]cfgcheck.Field{cfgcheck.F("ReadBuffer", readBuffer)}, more...)...); err != nil {
		return err
	}
	if err := n.Check(); err != nil {
		return fmt.Errorf("%w: NAK: %w", ErrConfig, err)
	}
	return nil
}

// Stats returns what the recorder journaled and the first journal error
// (a full disk, a deleted directory); after an error the recorder keeps
// running but does not record the stream that failed.
func (r *Recorder) Stats() (TapStats, error) {
	ts, err := r.tap.stats()
	ts.RefusedPackets = r.sub.Stats().Drops[subscriber.DropTooManyStreams]
	return ts, err
}

// FeedStats are the feed subscriber's counters (kernel drops, NAKs,
// recovered and lost messages).
func (r *Recorder) FeedStats() subscriber.Stats { return r.sub.Stats() }

// Close stops the feed subscriber and then syncs and closes every journal
// writer. A second call returns ErrClosed.
func (r *Recorder) Close() error {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return ErrClosed
	}
	r.closed = true
	r.mu.Unlock()
	return errors.Join(r.sub.Close(), r.tap.close())
}
