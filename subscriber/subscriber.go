package subscriber

import (
	"cmp"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"

	"github.com/mdbus/mdbus/internal/alarm"
	"github.com/mdbus/mdbus/internal/cfgcheck"
	"github.com/mdbus/mdbus/internal/monotime"
	"github.com/mdbus/mdbus/internal/sock"
	"github.com/mdbus/mdbus/nak"
	"github.com/mdbus/mdbus/packetconn"
	"github.com/mdbus/mdbus/wire"
)

// Defaults of Config.
const (
	DefaultInterface  = "lo"
	DefaultReadBuffer = 4 << 20
	// MaxBusyPoll bounds Config.Receive.BusyPoll (Close waits for a spinning
	// reader to give up).
	MaxBusyPoll = sock.MaxBusyPoll
	// DefaultReorderWindow is how long a subscriber that has no way to
	// recover (no Retransmitter, RepairGroup or Secondary) waits for a
	// reordered packet before it declares a gap lost.
	DefaultReorderWindow = 20 * time.Millisecond
	// UnicastNAKDelay is the wait before the first NAK of a gap when
	// repairs come unicast and there is one feed (no RepairGroup, no
	// Secondary) and Config.Recovery.NAK sets no delay: room for a reordered
	// packet, as Aeron's unicast NAK delay, instead of nak's random
	// 0-2 ms, which exists to let other receivers' repairs suppress a
	// NAK.
	UnicastNAKDelay     = 100 * time.Microsecond
	DefaultBatchSize    = 64
	DefaultDatagramSize = wire.MaxPayloadSize
	DefaultMaxStreams   = 64
	// DefaultMaxStreamsPerSource bounds the streams of one source
	// address (a host's publishers, or one sender forging sessions).
	DefaultMaxStreamsPerSource = 16
	// DefaultStreamIdleTimeout is how long a stream may be silent before
	// it is forgotten.
	DefaultStreamIdleTimeout = 10 * time.Minute
	DefaultReorderPackets    = 131072
	DefaultReorderBytes      = 32 << 20
	DefaultMaxGap            = 1 << 20
)

// Sentinel errors.
var (
	// ErrClosed is returned by Close after the first call.
	ErrClosed = errors.New("subscriber: closed")
	// ErrConfig wraps every invalid Config.
	ErrConfig = errors.New("subscriber: invalid config")
)

// Config configures a Subscriber. Group is required; every other field
// is optional, grouped by what it decides: who repairs a stream
// (Recovery), how the feed sockets are read and how much is held while
// a gap is repaired (Receive), and how much a sender may make the
// subscriber track (Limits).
//
// One rule for the values of every field, here and in the groups: the
// zero value means the default (a Default constant, or the behaviour
// the field's doc gives for it), so a Config that sets only Group is a
// working subscriber. A negative count or duration means "none" (no
// bound, never, hold nothing) for the fields whose doc says "negative:
// none"; for every other field, where "none" has no meaning (a buffer
// size, a batch, a wait that must end), a negative value is invalid and
// New returns an error wrapping ErrConfig that names it.
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
	// Secondary, when valid, is a second feed group (A/B) carrying the same
	// sessions as Group, joined on Interface. Streams are then keyed by
	// session only (StreamID.Source is the zero AddrPort), and each
	// sequence is delivered from whichever feed brings it first.
	Secondary netip.AddrPort
	// SecondarySource, when valid, makes the join of Secondary
	// source-specific, as Source does for Group.
	SecondarySource netip.Addr
	// StartSeq is the first sequence expected of every stream. 0 joins
	// live: the first packet seen starts the stream. A positive StartSeq
	// makes earlier sequences stale and a later first packet a gap.
	StartSeq wire.Seq

	// Recovery says who repairs a stream's gaps, whom the subscriber
	// trusts for repairs, and what follows a gap that is not repaired.
	Recovery Recovery
	// Receive tunes the receive path: socket buffers, batches, the
	// reorder buffer, busy polling, GRO and kernel timestamps.
	Receive Receive
	// Limits bounds what a sender can make the subscriber track: streams
	// at once, their idle lifetime, and how far a stream may jump.
	Limits Limits

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
	// OnLoss receives each range declared lost, [From, To) exactly: the
	// sequences of the stream that will never be delivered. It is called
	// in order with deliveries: after the message before From and before
	// the message at To. See "Recovery" in the package documentation.
	OnLoss func(Loss)
	// OnResync receives each confirmed jump of a stream beyond
	// Limits.MaxGap: the range skipped, in order with deliveries. It is
	// not a Loss: the range was never asked for, and its size comes off
	// the wire.
	OnResync func(Resync)
	// OnError receives each failed read of a socket, on the goroutine
	// reading it, without the subscriber's lock: it may call Stats and
	// Err, not Close. The first error is also kept for Err.
	OnError func(error)

	// Wrap, when set, wraps the primary feed socket (tests insert the
	// impairment layer here). The other sockets have their own hooks, so
	// each can be impaired independently.
	Wrap func(packetconn.PacketConn) packetconn.PacketConn
	// WrapSecondary, when set, wraps the Secondary feed socket.
	WrapSecondary func(packetconn.PacketConn) packetconn.PacketConn
	// WrapRepair, when set, wraps the unicast repair socket (it carries
	// the re-requests out and the unicast repairs in) and the
	// Recovery.RepairGroup socket.
	WrapRepair func(packetconn.PacketConn) packetconn.PacketConn
	// Logger receives warnings and errors; default none (a discarding
	// logger): a library does not write to the application's log unless
	// asked to.
	Logger *slog.Logger
}

// Recovery says who repairs a subscriber's streams: one Retransmitter
// (with Backups), or each source's own retransmitter at RetransmitPort,
// and a RepairGroup whose repairs every subscriber hears. It also says
// whom repairs are trusted from (a repair from anyone else is dropped,
// DropUntrustedRepair), when gaps are asked for and given up (NAK), and
// what follows a loss (LossPolicy). The zero value asks nobody: gaps are
// reported and, unless a Secondary feed fills them, declared lost.
type Recovery struct {
	// Retransmitter, when valid, is the unicast address re-requests (NAKs)
	// go to: a retransmit.Server or a rewinder. They leave from the
	// subscriber's own unicast repair socket, where the answers arrive;
	// a datagram there from any other address and port is dropped
	// (DropUntrustedRepair).
	// Invalid: no NAKs are sent; gaps are still reported, and declared lost
	// NAK.Deadline after they were found (when NAK.Deadline is zero and
	// neither RepairGroup nor Config.Secondary is set, nothing but
	// reordering can fill a gap, so the deadline is DefaultReorderWindow
	// instead).
	Retransmitter netip.AddrPort
	// Backups are further retransmitters of the Retransmitter's address
	// family (a second retransmit.Server, a rewinder of the journal),
	// asked in turn when the one asked stops answering: after Failover
	// of re-requests with no answer from it, the next of [Retransmitter,
	// Backups...] is asked, round robin (Stats.Failovers,
	// Stats.Asking). Repairs are accepted from every one of them. At
	// most MaxBackups; none without a Retransmitter.
	Backups []netip.AddrPort
	// RetransmitPort, when not 0, sends each stream's re-requests to its
	// own source's address at this port, instead of to one
	// Retransmitter: for a bus where every publisher host runs its own
	// retransmitter there (several StatsD relays, several "mdbus pub
	// --retransmit HOSTADDR:PORT"). An answer on the repair socket is
	// then used only if it comes from that port at the address of the
	// stream it repairs (DropUntrustedRepair otherwise). Not with
	// Retransmitter (one or the other) nor with Config.Secondary (A/B
	// streams are keyed by session alone, so they have no one source).
	// It trusts the feed's source addresses to say where to send: a
	// sender spoofing another host's address makes every subscriber send
	// its re-requests (20 bytes each, a few retries per gap) there. Use
	// it where the network vouches for sources (a closed multicast
	// domain, or Config.Source for SSM); elsewhere give a Retransmitter.
	RetransmitPort uint16
	// Failover is how long re-requests may go unanswered by the
	// retransmitter asked before the next is asked (with Backups).
	// Default five NAK retry intervals (50 ms with nak's defaults); keep
	// it well below the NAK deadline, so that the backup has time to
	// answer before the gap is given up.
	Failover time.Duration
	// RepairGroup, when valid, is a multicast group also joined on
	// Config.Interface; every packet from it is a repair.
	RepairGroup netip.AddrPort
	// RepairSource is the only address whose datagrams on RepairGroup are
	// accepted (any port: a retransmitter multicasts from a socket of its
	// own); the others are dropped (DropUntrustedRepair). It is the
	// source address the retransmitter's host picks for the repair group
	// (its address on Config.Interface's network), which need not be the
	// Retransmitter address. Unset, every source is accepted, and each
	// datagram so accepted is counted in Stats.UnverifiedRepairs: set it
	// wherever anyone else can reach the repair group.
	RepairSource netip.Addr
	// NAK tunes when missing messages are asked for again and when they
	// are given up (package nak, whose Config follows the same rule for
	// zero values). The zero value takes nak's LAN defaults: before the
	// first NAK, the group back-off with a RepairGroup
	// (nak.GroupBackoff), UnicastNAKDelay with unicast repairs and one
	// feed, else a random delay in [0, 2 ms); retries after
	// 10 ms doubling to 100 ms, lost after 1 s, at most 1024 messages per
	// request and 65536 tracked per stream. A zero Seed draws a random one;
	// a non-zero Seed makes the delays replayable (each stream derives its
	// own seed from it). Its fields follow Config's rule: none has a
	// "none", so New refuses a negative one (nak.Config.Check).
	NAK nak.Config
	// LossPolicy says what follows a loss: LossContinue (default) skips
	// the lost range and continues, LossStop stops delivering the stream.
	LossPolicy LossPolicy
}

// Receive tunes how a subscriber reads its feed sockets and how much it
// holds while a gap is repaired. The zero value is the defaults.
type Receive struct {
	// ReadBuffer is the SO_RCVBUF request in bytes; default 4 MiB (the
	// common net.core.rmem_max). The kernel doubles the request and caps
	// it at twice net.core.rmem_max; New logs a warning when it was
	// capped, and Stats reports what was granted.
	ReadBuffer int
	// BatchSize is the datagrams received per recvmmsg call; default 64.
	BatchSize int
	// DatagramSize is the receive buffer per datagram in bytes; default
	// wire.MaxPayloadSize (65507). Larger datagrams are dropped
	// (DropTruncatedDatagram).
	DatagramSize int
	// ReorderPackets bounds the out-of-order packets held per stream;
	// default 131072, negative: none held. ReorderBytes bounds the bytes
	// they take; default 32 MiB (22,000 full 1472-byte packets, 3,700
	// jumbo ones), negative: no byte bound. The packet bound is sized to
	// outlast the NAK deadline (1 s) at a feed's packet rate when its
	// packets are small: at 80,000 packets/s of two or three ITCH
	// messages, 16,384 held packets fill in 200 ms, and a subscriber
	// that falls that far behind a repair under sustained loss (3
	// subscribers at 5% loss on 2 cores) gives up gaps the retransmitter
	// is still answering. Holding costs the packet's bytes plus 56 bytes
	// of bookkeeping (at most 14 MiB at the bound, taken only as the
	// buffer fills). When either bound is reached, a repair older than
	// the newest held packet takes that one's slot (it is asked for
	// again), and otherwise the stream gives up its oldest gap as a Loss
	// (Stats.ReorderOverflows); with a Recovery.Retransmitter, only once
	// that gap has waited two NAK retry intervals (until then the newer
	// packet is dropped and asked for again). Raise them where repairs
	// may take longer than the buffer lasts at the feed's rate.
	ReorderPackets int
	ReorderBytes   int
	// BusyPoll makes the reader of each feed socket (Group, Secondary)
	// spin on a non-blocking receive for up to this long before it
	// parks: a packet that arrives meanwhile is read without waiting for
	// the network poller and the OS scheduler to wake a thread, which is
	// where the receive path's tail latency comes from on a busy host.
	// It costs up to one CPU per feed socket while packets come closer
	// together than BusyPoll, and a busy-polled socket is kept off Go's
	// network poller (internal/sock, "Off the poller"), so its reader
	// holds a thread while it waits. Default 0: never spins; at most
	// MaxBusyPoll. See "Busy polling" in the package documentation.
	BusyPoll time.Duration
	// DisableGRO turns off UDP_GRO on the feed sockets (Group,
	// Secondary). By default they ask for it, so a GSO publisher's
	// packets arrive up to 64 per read and cost the kernel's per-datagram
	// receive work once; where the kernel refuses, they read plain. See
	// "UDP GRO" in the package documentation.
	DisableGRO bool
	// Timestamps asks the kernel for receive timestamps (SO_TIMESTAMPNS)
	// on the feed sockets, for a Wrap that reads sock.Message.KernelTime
	// (the benchmarks split wire time from receive-path time with it).
	Timestamps bool
}

// Limits bounds what the senders on a subscriber's groups can make it
// track, so that a forged or runaway sender costs bounded memory. The
// zero value is the defaults.
type Limits struct {
	// MaxStreams bounds the streams tracked at once; default 64.
	// MaxStreamsPerSource bounds those of one source address; default 16,
	// negative: no per-source bound. A packet that would start one
	// stream too many makes room by forgetting the least recently active
	// stream (of that source, when its bound is reached) that is done
	// (ended, stopped, superseded or replaced), or else has delivered
	// nothing yet (heartbeats only: forged, or a publisher not started),
	// or else has been silent for a second (a crashed publisher; a live
	// one heartbeats) (Stats.StreamsEvicted); when there is none it is
	// dropped (DropTooManyStreams). A live stream that delivered messages
	// is never forgotten for room.
	MaxStreams          int
	MaxStreamsPerSource int
	// StreamIdleTimeout forgets a stream that received nothing for this
	// long (Stats.StreamsExpired), checked whenever a stream starts;
	// default 10 minutes, negative: never. A live publisher heartbeats
	// (every second by default), so only streams of publishers gone are
	// forgotten.
	StreamIdleTimeout time.Duration
	// MaxGap is how far ahead of the next expected sequence, in messages,
	// a packet, heartbeat or end of session may be; default 1<<20.
	// Beyond it, it is a suspect: dropped (DropSeqJump) unless a second
	// packet or heartbeat of the stream's own source confirms the jump,
	// which makes the stream resync (Config.OnResync).
	MaxGap uint64
}

// LossPolicy says what a subscriber does when a range of a stream is
// declared lost.
type LossPolicy uint8

// Loss policies.
const (
	// LossContinue reports the loss (OnLoss) and continues delivering
	// the stream after the lost range.
	LossContinue LossPolicy = iota
	// LossStop reports the loss and stops the stream: nothing more of it
	// is delivered, later packets are dropped (DropStopped) and OnEnd is
	// not called.
	LossStop
)

// String returns "continue" or "stop".
func (p LossPolicy) String() string {
	switch p {
	case LossContinue:
		return "continue"
	case LossStop:
		return "stop"
	}
	return fmt.Sprintf("LossPolicy(%d)", uint8(p))
}

// withDefaults validates c and fills in its defaults.
func (c Config) withDefaults() (Config, error) {
	unmap := func(a netip.AddrPort) netip.AddrPort { return netip.AddrPortFrom(a.Addr().Unmap(), a.Port()) }
	group := func(name string, g netip.AddrPort) error {
		if !g.Addr().IsMulticast() || g.Port() == 0 {
			return fmt.Errorf("%w: %s %s: want a multicast address and a port", ErrConfig, name, g)
		}
		return nil
	}
	source := func(name string, src netip.Addr, g netip.AddrPort) (netip.Addr, error) {
		if !src.IsValid() {
			return src, nil
		}
		src = src.Unmap()
		if src.Is4() != g.Addr().Is4() {
			return src, fmt.Errorf("%w: %s %s and group %s are of different IP versions", ErrConfig, name, src, g.Addr())
		}
		return src, nil
	}
	var err error
	c.Group = unmap(c.Group)
	if err := group("group", c.Group); err != nil {
		return c, err
	}
	if c.Source, err = source("source", c.Source, c.Group); err != nil {
		return c, err
	}
	if c.Secondary.IsValid() {
		c.Secondary = unmap(c.Secondary)
		if err := group("secondary", c.Secondary); err != nil {
			return c, err
		}
		if c.Secondary == c.Group {
			return c, fmt.Errorf("%w: secondary %s is the primary group", ErrConfig, c.Secondary)
		}
	}
	if c.SecondarySource.IsValid() && !c.Secondary.IsValid() {
		return c, fmt.Errorf("%w: secondary source %s without a secondary group", ErrConfig, c.SecondarySource)
	}
	if c.SecondarySource, err = source("secondary source", c.SecondarySource, c.Secondary); err != nil {
		return c, err
	}
	if c.Recovery.RepairGroup.IsValid() {
		c.Recovery.RepairGroup = unmap(c.Recovery.RepairGroup)
		if err := group("repair group", c.Recovery.RepairGroup); err != nil {
			return c, err
		}
		if c.Recovery.RepairGroup == c.Group || c.Recovery.RepairGroup == c.Secondary {
			return c, fmt.Errorf("%w: repair group %s is also a feed group", ErrConfig, c.Recovery.RepairGroup)
		}
	}
	if c.Recovery.Retransmitter.IsValid() {
		c.Recovery.Retransmitter = unmap(c.Recovery.Retransmitter)
		if a := c.Recovery.Retransmitter.Addr(); a.IsMulticast() || a.IsUnspecified() || c.Recovery.Retransmitter.Port() == 0 {
			return c, fmt.Errorf("%w: retransmitter %s: want a unicast address and a port", ErrConfig, c.Recovery.Retransmitter)
		}
	}
	if err := c.backups(); err != nil {
		return c, err
	}
	if c.Recovery.RetransmitPort != 0 {
		switch {
		case c.Recovery.Retransmitter.IsValid():
			return c, fmt.Errorf("%w: both a Retransmitter and a RetransmitPort: give one (one retransmitter for all, or each source's own)", ErrConfig)
		case c.Secondary.IsValid():
			return c, fmt.Errorf("%w: RetransmitPort with a Secondary feed: A/B streams have no one source to ask; give a Retransmitter", ErrConfig)
		}
	}
	if c.Recovery.RepairSource.IsValid() {
		if !c.Recovery.RepairGroup.IsValid() {
			return c, fmt.Errorf("%w: repair source %s without a repair group", ErrConfig, c.Recovery.RepairSource)
		}
		if c.Recovery.RepairSource, err = source("repair source", c.Recovery.RepairSource, c.Recovery.RepairGroup); err != nil {
			return c, err
		}
	}
	if c.Receive.BusyPoll < 0 || c.Receive.BusyPoll > MaxBusyPoll {
		return c, fmt.Errorf("%w: busy poll %v: want 0 to %v", ErrConfig, c.Receive.BusyPoll, MaxBusyPoll)
	}
	if err := c.Recovery.NAK.Check(); err != nil {
		return c, fmt.Errorf("%w: Recovery.NAK: %w", ErrConfig, err)
	}
	if c.Recovery.LossPolicy > LossStop {
		return c, fmt.Errorf("%w: loss policy %v", ErrConfig, c.Recovery.LossPolicy)
	}
	// The fields where "none" has no meaning: negative is invalid (see
	// Config).
	for _, f := range []struct {
		name string
		v    int
	}{
		{"Receive.ReadBuffer", c.Receive.ReadBuffer},
		{"Receive.BatchSize", c.Receive.BatchSize},
		{"Receive.DatagramSize", c.Receive.DatagramSize},
		{"Limits.MaxStreams", c.Limits.MaxStreams},
	} {
		if f.v < 0 {
			return c, fmt.Errorf("%w: %s %d: want a positive value (0: the default)", ErrConfig, f.name, f.v)
		}
	}
	if c.Interface == "" {
		c.Interface = DefaultInterface
	}
	c.Receive.ReadBuffer = cmp.Or(c.Receive.ReadBuffer, DefaultReadBuffer)
	c.Receive.BatchSize = cmp.Or(c.Receive.BatchSize, DefaultBatchSize)
	c.Receive.DatagramSize = max(cmp.Or(c.Receive.DatagramSize, DefaultDatagramSize), wire.HeaderLen)
	c.Limits.MaxStreams = cmp.Or(c.Limits.MaxStreams, DefaultMaxStreams)
	c.Limits.MaxStreamsPerSource = cfgcheck.OrNone(c.Limits.MaxStreamsPerSource, DefaultMaxStreamsPerSource)
	c.Limits.StreamIdleTimeout = cfgcheck.OrNone(c.Limits.StreamIdleTimeout, DefaultStreamIdleTimeout)
	c.Receive.ReorderPackets = cfgcheck.OrNone(c.Receive.ReorderPackets, DefaultReorderPackets)
	c.Receive.ReorderBytes = cfgcheck.OrNone(c.Receive.ReorderBytes, DefaultReorderBytes)
	c.Limits.MaxGap = cmp.Or(c.Limits.MaxGap, DefaultMaxGap)
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c, nil
}

// asks reports whether the subscriber sends re-requests: to a
// Retransmitter, or to each source's RetransmitPort.
func (c Config) asks() bool {
	return c.Recovery.Retransmitter.IsValid() || c.Recovery.RetransmitPort != 0
}

func (c Config) core() coreConfig {
	nc := c.Recovery.NAK
	if !c.asks() {
		// Nobody to ask: the first "NAK" of every gap falls due at its
		// deadline, where Poll declares it lost instead (nak checks the
		// deadline first), so no request is ever produced. When nothing
		// at all can fill a gap (no repair group, no second feed), only
		// reordering can, so the default deadline is the reorder window.
		if nc.Deadline <= 0 {
			nc.Deadline = nak.DefaultDeadline
			if !c.Recovery.RepairGroup.IsValid() && !c.Secondary.IsValid() {
				nc.Deadline = DefaultReorderWindow
			}
		}
		nc.Generator = nak.FixedDelay(nc.Deadline)
	}
	if c.asks() && !c.Recovery.RepairGroup.IsValid() && !c.Secondary.IsValid() && nc.Delay <= 0 && nc.Generator == nil {
		// Unicast repairs and one feed: no other receiver hears this
		// one's requests or repairs and no partner feed can fill the
		// gap, so a random wait suppresses nothing. Only reordering can
		// still fill it, within microseconds on a host or LAN.
		nc.Generator = nak.FixedDelay(UnicastNAKDelay)
	}
	return coreConfig{
		maxStreams: c.Limits.MaxStreams,
		perSource:  c.Limits.MaxStreamsPerSource,
		idle:       c.Limits.StreamIdleTimeout,
		reorder:    c.Receive.ReorderPackets,
		reorderB:   c.Receive.ReorderBytes,
		maxGap:     c.Limits.MaxGap,
		startSeq:   c.StartSeq,
		ab:         c.Secondary.IsValid(),
		nak:        nc,
		// The group back-off needs a repair group: without one nobody
		// hears another's confirm or repair, so waiting suppresses
		// nothing and only delays the repair.
		backoff:    c.asks() && c.Recovery.RepairGroup.IsValid() && c.Recovery.NAK.Delay <= 0 && c.Recovery.NAK.Generator == nil,
		payload:    defaultPayload(c.Group.Addr()),
		sendNAKs:   c.asks(),
		retrPort:   c.Recovery.RetransmitPort,
		asker:      c.asker(),
		fullGrace:  2 * cmp.Or(nc.Retry, nak.DefaultRetry),
		lossPolicy: c.Recovery.LossPolicy,
		onMessage:  c.OnMessage,
		onGap:      c.OnGap,
		onEnd:      c.OnEnd,
		onLoss:     c.OnLoss,
		onResync:   c.OnResync,
	}
}

// defaultPayload is the answer packet size a retransmitter of a feed on
// group uses by default.
func defaultPayload(group netip.Addr) int {
	if group.Is4() || group.Is4In6() {
		return wire.DefaultPayloadSizeIPv4
	}
	return wire.DefaultPayloadSizeIPv6
}

// Sizes of the secondary sockets' batches.
const (
	repairBatchSize  = 16 // datagrams per recvmmsg on a repair socket
	pollBatchSize    = 4  // datagrams per non-blocking read of the repair sockets by a feed reader
	requestBatchSize = 64 // re-requests per sendmmsg
)

// Subscriber receives one multicast group (or an A/B pair) and delivers
// its streams in order, asking a retransmitter for what is missing. Its
// methods are safe for concurrent use, but not from inside its callbacks
// (they run with its lock held).
type Subscriber struct {
	cfg     Config
	c       *core
	r       *reader         // the primary feed's reader
	conn    sock.PacketConn // the primary feed socket
	readers []*reader       // every socket's reader, the primary first
	repair  sock.PacketConn // the unicast repair socket; nil without a Retransmitter
	granted int

	closed  atomic.Bool
	quit    chan struct{} // closed by Close: ends a reader's wait before a retry
	done    chan struct{} // closed when the primary reader stops
	wg      sync.WaitGroup
	errMu   sync.Mutex
	loopErr error

	// Owned by the timer goroutine, or by a feed reader sending in its
	// stead on one Go processor (pollInline).
	pollMu         sync.Mutex // owns reqs, reqTo and the send buffers
	reqs           []wire.Request
	out            *sock.Batch
	reqBuf         []byte
	reqTo          []netip.AddrPort // where each of reqs goes
	failoverLogged monotime.Time    // when logFailover last logged; 0: never
	suspectLogged  monotime.Time    // when logSuspect last logged; 0: never
	suspectQuiet   uint64           // suspects not logged since
	failoverQuiet  int              // failovers not logged since

	nakErrors      atomic.Uint64
	readErrors     atomic.Uint64
	readersStopped atomic.Uint64
}

// New opens the sockets, joins the groups on the interface and starts the
// goroutines: one reader per socket and the NAK timer. Close stops them.
//
// The sockets: the primary feed (Group; wildcard address and the group's
// port, shared with other subscribers of that port), the Secondary feed
// and the RepairGroup when set (bound likewise), and, with a
// Retransmitter, a unicast repair socket of the retransmitter's address
// family on a port of its own, from which re-requests leave and on which
// their answers arrive.
func New(cfg Config) (*Subscriber, error) {
	s, err := open(cfg)
	if err != nil {
		return nil, err
	}
	s.c.alarm = alarm.New() // before the readers, which set it (core.rearm)
	for _, r := range s.readers {
		s.wg.Add(1)
		go s.run(r)
	}
	s.wg.Add(1)
	go s.runTimer()
	return s, nil
}

// open is New without the goroutines (tests drive the readers and
// c.poll themselves).
func open(cfg Config) (s *Subscriber, err error) {
	cfg, err = cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	ifi, err := net.InterfaceByName(cfg.Interface)
	if err != nil {
		return nil, fmt.Errorf("subscriber: interface %q: %w", cfg.Interface, err)
	}
	s = &Subscriber{cfg: cfg, quit: make(chan struct{})}
	cc := cfg.core()
	cc.onSuspect = s.logSuspect
	s.c = newCore(cc)
	defer func() {
		if err != nil {
			s.closeConns()
		}
	}()
	conn, granted, err := s.openGroup(ifi, cfg.Group, cfg.Source, cfg.Receive.BusyPoll, !cfg.Receive.DisableGRO, cfg.Wrap)
	if err != nil {
		return s, err
	}
	s.conn, s.granted = conn, granted
	s.r = s.addReader(conn, cfg.Receive.BatchSize, cfg.Group.Addr(), cfg.Source, FeedPrimary)
	s.done = s.r.done
	if cfg.Secondary.IsValid() {
		conn, _, err := s.openGroup(ifi, cfg.Secondary, cfg.SecondarySource, cfg.Receive.BusyPoll, !cfg.Receive.DisableGRO, cfg.WrapSecondary)
		if err != nil {
			return s, err
		}
		s.addReader(conn, cfg.Receive.BatchSize, cfg.Secondary.Addr(), cfg.SecondarySource, FeedSecondary)
	}
	if cfg.Recovery.RepairGroup.IsValid() {
		conn, _, err := s.openGroup(ifi, cfg.Recovery.RepairGroup, netip.Addr{}, 0, false, cfg.WrapRepair)
		if err != nil {
			return s, err
		}
		r := s.addReader(conn, repairBatchSize, cfg.Recovery.RepairGroup.Addr(), netip.Addr{}, FeedRepairGroup)
		if cfg.Recovery.RepairSource.IsValid() {
			r.from = netip.AddrPortFrom(cfg.Recovery.RepairSource, 0)
		}
	}
	if cfg.asks() {
		// Of the retransmitters' family: the Retransmitter's, or with
		// RetransmitPort the sources', the feed's.
		wild := netip.IPv4Unspecified()
		if cfg.Recovery.Retransmitter.Addr().Is6() || (cfg.Recovery.RetransmitPort != 0 && cfg.Group.Addr().Is6()) {
			wild = netip.IPv6Unspecified()
		}
		// No SO_REUSEPORT: the answers must reach this socket and no
		// other (see "Recovery" in the package documentation).
		conn, err := sock.Open(sock.Config{Local: netip.AddrPortFrom(wild, 0), ReadBuffer: cfg.Receive.ReadBuffer})
		if err != nil {
			return s, fmt.Errorf("subscriber: repair socket: %w", err)
		}
		var pc sock.PacketConn = conn
		if cfg.WrapRepair != nil {
			pc = cfg.WrapRepair(pc)
		}
		s.repair = pc
		s.addReader(pc, repairBatchSize, netip.Addr{}, netip.Addr{}, FeedRepair)
		s.out = sock.NewBatch(requestBatchSize, 0)
		s.reqBuf = make([]byte, requestBatchSize*wire.RequestLen)
	}
	s.linkPolls()
	return s, nil
}

// linkPolls makes each feed reader poll the repair sockets that can be
// read without waiting, and send the re-requests due, when the program
// runs on one Go processor (see reader.pollRepairs).
func (s *Subscriber) linkPolls() {
	var polls []*reader
	for _, r := range s.readers {
		if _, ok := r.conn.(packetconn.TryReader); ok && r.repair {
			polls = append(polls, r)
		}
	}
	for _, r := range s.readers {
		if r.repair {
			continue
		}
		if len(polls) > 0 {
			r.polls = polls
			r.pollBatch = sock.NewBatch(pollBatchSize, s.cfg.Receive.DatagramSize)
		}
		if s.repair != nil {
			r.nakPoll = s.pollInline
		}
	}
}

// pollInline sends the re-requests due, unless the timer goroutine is
// doing so: a feed reader calls it in that goroutine's stead (see
// reader.pollRepairs).
func (s *Subscriber) pollInline() {
	if !s.pollMu.TryLock() {
		return
	}
	s.pollSend(monotime.Now())
	s.pollMu.Unlock()
}

// openGroup opens a socket bound to the wildcard address and g's port
// (shared with other subscribers of that port), joins g on ifi (from src
// only when valid), busy-polls it for spin, receives with UDP_GRO when gro
// and wraps it with wrap when set.
func (s *Subscriber) openGroup(ifi *net.Interface, g netip.AddrPort, src netip.Addr, spin time.Duration, gro bool, wrap func(sock.PacketConn) sock.PacketConn) (sock.PacketConn, int, error) {
	cfg := s.cfg
	wild := netip.IPv4Unspecified()
	if g.Addr().Is6() {
		wild = netip.IPv6Unspecified()
	}
	conn, err := sock.Open(sock.Config{
		Local:      netip.AddrPortFrom(wild, g.Port()),
		ReusePort:  true,
		ReadBuffer: cfg.Receive.ReadBuffer,
		Timestamps: cfg.Receive.Timestamps,
		BusyPoll:   spin,
		GRO:        gro,
	})
	if err != nil {
		return nil, 0, fmt.Errorf("subscriber: %w", err)
	}
	if err := conn.Join(ifi, g.Addr(), src); err != nil {
		conn.Close()
		return nil, 0, fmt.Errorf("subscriber: %w", err)
	}
	if gro && !conn.GRO() {
		cfg.Logger.Info("subscriber: the kernel refused UDP_GRO (Linux 5.0+); the feed socket reads plain", "group", g)
	}
	granted := conn.ReadBufferGranted
	if granted < 2*cfg.Receive.ReadBuffer {
		cfg.Logger.Warn("subscriber: the kernel capped the receive buffer; raise net.core.rmem_max to get the requested size",
			"group", g, "requested", cfg.Receive.ReadBuffer, "granted", granted, "want_granted", 2*cfg.Receive.ReadBuffer)
	}
	var pc sock.PacketConn = conn
	if wrap != nil {
		pc = wrap(pc)
	}
	return pc, granted, nil
}

// addReader adds a reader of conn.
func (s *Subscriber) addReader(conn sock.PacketConn, batch int, group, source netip.Addr, feed Feed) *reader {
	r := &reader{
		conn:   conn,
		batch:  sock.NewBatch(batch, s.cfg.Receive.DatagramSize),
		c:      s.c,
		group:  group,
		source: source,
		repair: feed == FeedRepair || feed == FeedRepairGroup,
		feed:   feed,
		done:   make(chan struct{}),
	}
	s.readers = append(s.readers, r)
	return r
}

// closeConns closes every socket and returns the first error.
func (s *Subscriber) closeConns() error {
	var first error
	for _, r := range s.readers {
		if err := r.conn.Close(); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// Read-error backoff: a socket that fails to read is tried again after
// readRetryMin, doubling to readRetryMax while it keeps failing.
const (
	readRetryMin = time.Millisecond
	readRetryMax = 100 * time.Millisecond
)

// run is a receive goroutine: it reads r until Close. A read error is
// counted (Stats.ReadErrors), kept for Err (the first) and passed to
// OnError; the socket is read again after a backoff, unless it was closed
// under the subscriber (a Wrap that closed it), which stops this reader
// for good (Stats.ReadersStopped).
func (s *Subscriber) run(r *reader) {
	defer s.wg.Done()
	defer close(r.done)
	wait := readRetryMin
	for {
		err := r.readOnce()
		if err == nil {
			wait = readRetryMin
			continue
		}
		if s.closed.Load() {
			return
		}
		if sock.IsTimeout(err) {
			continue
		}
		err = fmt.Errorf("subscriber: receive (%v feed) on %s: %w", r.feed, r.conn.LocalAddr(), err)
		s.readErrors.Add(1)
		s.errMu.Lock()
		if s.loopErr == nil {
			s.loopErr = err
		}
		s.errMu.Unlock()
		if s.cfg.OnError != nil {
			s.cfg.OnError(err)
		}
		if errors.Is(err, net.ErrClosed) {
			s.readersStopped.Add(1)
			s.cfg.Logger.Error("subscriber: socket closed under the subscriber; it is no longer read", "feed", r.feed, "err", err)
			return
		}
		s.cfg.Logger.Warn("subscriber: receive failed; retrying", "feed", r.feed, "err", err, "retry_in", wait)
		select {
		case <-s.quit:
			return
		case <-time.After(wait):
		}
		wait = min(2*wait, readRetryMax)
	}
}

// Err returns the first error a socket's read returned since New, or nil.
// The subscriber keeps reading the other sockets, and the failed one again
// after a backoff unless it was closed; Stats.ReadErrors counts every
// failure.
func (s *Subscriber) Err() error {
	s.errMu.Lock()
	defer s.errMu.Unlock()
	return s.loopErr
}

// Close leaves the groups, closes the sockets and waits for the
// goroutines to stop. It returns the first read error (see Err), if any.
// Calls after the first return ErrClosed. It must not be called from a
// callback.
func (s *Subscriber) Close() error {
	if !s.closed.CompareAndSwap(false, true) {
		return ErrClosed
	}
	close(s.quit)
	if s.c.alarm != nil {
		s.c.alarm.Close()
	}
	cerr := s.closeConns()
	s.wg.Wait()
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

// LocalAddr is the address the primary feed socket is bound to: the
// wildcard address and the group's port.
func (s *Subscriber) LocalAddr() netip.AddrPort { return s.conn.LocalAddr() }

// RepairAddr is the address of the unicast repair socket, from which
// re-requests leave and to which a retransmitter sends its answers; the
// zero AddrPort without a Retransmitter.
func (s *Subscriber) RepairAddr() netip.AddrPort {
	if s.repair == nil {
		return netip.AddrPort{}
	}
	return s.repair.LocalAddr()
}

// Stats returns the counters since New. They stay readable after Close.
func (s *Subscriber) Stats() Stats {
	s.c.mu.Lock()
	st := s.c.stats()
	s.c.mu.Unlock()
	st.NAKErrors = s.nakErrors.Load()
	st.ReadErrors = s.readErrors.Load()
	st.ReadersStopped = s.readersStopped.Load()
	st.ReadBufferRequested = s.cfg.Receive.ReadBuffer
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

// RecoveryHistogram returns a copy of the recovery times of every stream
// since New, in microseconds (1 µs to 60 s, 3 significant digits): the
// time from finding a gap to filling it, one value per packet that filled
// some of it. It is the caller's to keep, e.g. to write a .hgrm file with
// PercentilesPrint(w, 5, 1).
func (s *Subscriber) RecoveryHistogram() *hdrhistogram.Histogram {
	s.c.mu.Lock()
	defer s.c.mu.Unlock()
	return s.c.recoveryHistogram()
}

// logSuspect warns, at most once a second, that a stream's packet jumped
// beyond MaxGap and is held as a suspect: until a second packet of the
// same source confirms the jump, nothing after it is delivered, which a
// replayed capture with a hole in its sequence numbers shows as a stream
// that stops. It runs under the core's lock.
func (s *Subscriber) logSuspect(id StreamID, next, seq wire.Seq) {
	now := monotime.Now()
	if s.suspectLogged != 0 && now.Sub(s.suspectLogged) < time.Second {
		s.suspectQuiet++
		return
	}
	s.cfg.Logger.Warn("subscriber: a packet jumped beyond the gap bound; dropped until its source confirms the jump (raise MaxGap, mdbus sub --max-gap, to accept such jumps)",
		"stream", id, "expected", next, "got", seq, "ahead", uint64(seq-next), "max_gap", s.cfg.Limits.MaxGap,
		"suspects_not_logged", s.suspectQuiet)
	s.suspectLogged, s.suspectQuiet = now, 0
}
