package subscriber

import (
	"bytes"
	"cmp"
	"net/netip"
	"slices"
	"sync"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
	"github.com/mdbus/mdbus/internal/alarm"
	"github.com/mdbus/mdbus/internal/monotime"
	"github.com/mdbus/mdbus/nak"
	"github.com/mdbus/mdbus/wire"
)

// StreamID names a stream: one incarnation of a session from one source
// address and port (wire.StreamID, the identity every role uses). With a
// Secondary feed (A/B) the two copies of a session come from different
// sources, so streams are keyed by session alone and Source is the zero
// AddrPort. Incarnation counts, from 1, the times this subscriber saw the
// session start: a publisher restarted under the same session name on a
// new source port, or on the same port with its sequence starting over
// (wire.StreamPos.Fit), is a new incarnation, and nothing of one
// incarnation is delivered as another's (see "Streams" in the package
// documentation).
type StreamID = wire.StreamID

// Message is one delivered message. Data is a sub-slice of a receive
// buffer: it is valid only until the callback returns; copy what you keep.
type Message struct {
	Stream StreamID
	Seq    wire.Seq
	Data   []byte
	// PacketStart: the first message delivered from its packet (the
	// others of that packet follow it with PacketStart false), so a
	// recorder can keep which messages shared a packet.
	PacketStart bool
}

// Gap is a range of sequences [From, To) found missing from a stream. Each
// sequence is reported in at most one Gap.
type Gap struct {
	Stream   StreamID
	From, To wire.Seq
}

// Len is the number of messages in the gap.
func (g Gap) Len() uint64 { return uint64(g.To - g.From) }

// Resync is a jump of a stream past a range it will never receive: the
// stream fell more than Config.Limits.MaxGap behind its publisher (an outage, an
// overload) and, once the publisher's own packets confirmed the jump, went
// on from To. [From, To) is skipped; unlike a Loss it was never reported
// missing nor requested.
type Resync struct {
	Stream   StreamID
	From, To wire.Seq
}

// coreConfig is the part of Config the stream logic needs, defaults
// applied.
type coreConfig struct {
	maxStreams int
	perSource  int           // streams per source address at most
	idle       time.Duration // a stream silent this long is forgotten; 0: never
	reorder    int
	reorderB   int // bytes held per stream at most; 0: no byte bound
	maxGap     uint64
	startSeq   wire.Seq
	ab         bool       // A/B: streams keyed by session only
	nak        nak.Config // for every stream's detector (Seed is derived per stream)
	// backoff: the detectors share a nak.GroupBackoff sized by the
	// retransmitter's confirms (the default, with neither NAK.Delay nor
	// NAK.Generator set).
	backoff bool
	// payload is the answer packet size assumed when sizing requests
	// (the default for the group's family).
	payload  int
	sendNAKs bool   // a Retransmitter or RetransmitPort is configured
	retrPort uint16 // RetransmitPort: each stream's source is asked at this port
	asker    asker  // who is asked: the Retransmitter and its Backups
	// fullGrace is how long a full reorder buffer of a subscriber that
	// sends NAKs drops newer packets before it gives up its oldest gap
	// (see overflow).
	fullGrace  time.Duration
	lossPolicy LossPolicy
	onMessage  func(Message)
	onGap      func(Gap)
	onEnd      func(StreamID, wire.Seq)
	onLoss     func(Loss)
	onResync   func(Resync)
	// onSuspect is told of each new suspect jump (beyond maxGap, not yet
	// confirmed): stream, next expected, the suspect's sequence. It runs
	// with the core's lock held.
	onSuspect func(id StreamID, next, seq wire.Seq)
}

// core is the stream state of a subscriber, independent of any socket.
// Every field below mu, and every stream, is guarded by mu; readers take
// it once per batch and call handleDatagram/handlePacket for each
// datagram. Callbacks run with mu held.
type core struct {
	cfg coreConfig

	mu        sync.Mutex
	streams   map[streamKey]*stream      // the current incarnation of each key
	bySession map[wire.Session]*stream   // the newest incarnation of each session: where its repairs go
	bySource  map[netip.AddrPort]*stream // the latest stream of each source
	// incarnations is the last incarnation number given to each session.
	incarnations map[wire.Session]uint32
	// forgotten queues the sessions whose last stream was forgotten, from
	// forgottenHead on, oldest first (rememberForgotten).
	forgotten     []forgottenNum
	forgottenHead int
	list          []*stream // the streams in order of creation (stable iteration)
	last          *stream   // one-entry lookup cache
	free          [][]byte  // reorder slot buffers not in use
	freeB         int       // their capacity in bytes, kept at most freeLimit
	touched       byte      // drain's touch sum, kept so the compiler keeps its loads
	st            Stats
	created       uint64 // streams created, for detector seeds

	// Recovery (see recovery.go).
	backoff *nak.GroupBackoff       // shared by the detectors (cfg.backoff); nil otherwise
	ask     asker                   // the retransmitter asked (failover.go)
	hist    *hdrhistogram.Histogram // every stream's recovery times, µs; nil until the first
	retired nak.Stats               // detector counters of forgotten streams
	reqTo   []netip.AddrPort        // with retrPort: poll's destination of each request
	nreqs   []nak.Range             // Poll scratch
	nlost   []nak.Range             // Poll scratch
	alarm   *alarm.Clock            // wakes the timer goroutine at timerAt; nil without one
	timerAt monotime.Time           // when the timer goroutine will poll next

	// The two parts of the recoveries of ranges asked once (recordSplit),
	// µs; nil until the first.
	askedHist, answeredHist *hdrhistogram.Histogram
}

// arrival is the context of one datagram: when and from where it arrived,
// and on which socket. It travels by value down the handling of the
// datagram; nothing of it is kept on the core between datagrams.
type arrival struct {
	now    monotime.Time
	src    netip.AddrPort // its source address and port
	feed   Feed           // the socket it arrived on
	repair bool           // a repair (the unicast repair socket or the repair group)
}

func newCore(cfg coreConfig) *core {
	return &core{
		cfg:          cfg,
		streams:      make(map[streamKey]*stream, cfg.maxStreams),
		bySession:    make(map[wire.Session]*stream, cfg.maxStreams),
		bySource:     make(map[netip.AddrPort]*stream, cfg.maxStreams),
		incarnations: make(map[wire.Session]uint32, cfg.maxStreams),
		timerAt:      maxTime,
		ask:          cfg.asker,
		backoff:      newBackoff(cfg),
	}
}

func newBackoff(cfg coreConfig) *nak.GroupBackoff {
	if !cfg.backoff {
		return nil
	}
	return nak.NewGroupBackoff(cfg.nak.Seed)
}

// drop counts a dropped datagram. c.mu must be held.
func (c *core) drop(r DropReason) {
	c.st.Dropped++
	c.st.Drops[r]++
}

// handleDatagram decodes one datagram that arrived as a and handles it. b
// is only read during the call. c.mu must be held.
func (c *core) handleDatagram(a arrival, b []byte) {
	p, err := wire.ParsePacket(b)
	if err != nil {
		c.drop(dropReasonOf(err))
		return
	}
	c.handlePacket(a, p)
}

// handlePacket handles one decoded packet that arrived as a: it finds or
// starts its stream, delivers what became in order, holds what is early,
// reports new gaps and drops the rest with a reason. The packet's bytes
// are only read during the call (held packets are copied). A repair
// packet (a.repair), its source already trusted, goes to the newest
// incarnation of its session, never starts a stream and never moves one
// beyond MaxGap. With A/B feeds streams are keyed by session alone. c.mu
// must be held.
func (c *core) handlePacket(a arrival, p wire.Packet) {
	c.st.Packets++
	h := p.Header
	if h.IsHeartbeat() {
		c.st.Heartbeats++
	}
	if h.Seq == wire.InvalidSeq { // ParsePacket lets 0 through on heartbeats and ends
		c.drop(DropZeroSeq)
		return
	}
	var s *stream
	if a.repair {
		if s = c.bySession[h.Session]; s == nil {
			c.drop(DropUnknownRepair)
			return
		}
	} else {
		key := streamKey{source: a.src, session: h.Session}
		if c.cfg.ab {
			key.source = netip.AddrPort{}
		}
		if s = c.lookup(key, h.Seq, a.now); s == nil {
			return
		}
		if !h.IsEndOfSession() && c.restarted(s, p, a) {
			s = c.incarnate(s, p, a)
		}
		if !s.current {
			if cur := c.bySession[h.Session]; cur == nil || c.quiet(cur, a.now) {
				if cur != nil {
					c.replace(cur)
				}
				c.makeCurrent(s, a.now)
			}
		}
	}
	s.lastActive = a.now
	if s.stopped {
		c.drop(DropStopped)
		return
	}
	if a.repair && a.feed == FeedRepairGroup && c.backoff != nil && h.Count > 0 && h.Seq < s.horizon {
		// A repair on the group for a range this subscriber has seen
		// past (one beyond its horizon may be a loss it has not found
		// yet): did it fill a loss of ours? The share that do tells
		// shared losses from independent ones (nak.GroupBackoff).
		c.backoff.ObserveRepair(s.nak != nil && s.nak.Overlaps(nak.Range{From: h.Seq, To: h.Seq + wire.Seq(h.Count)}))
	}
	c.handleIn(s, p, a)
}

// handleIn hands p, which arrived as a, to stream s by kind.
func (c *core) handleIn(s *stream, p wire.Packet, a arrival) {
	h := p.Header
	if !a.repair {
		f := &s.feedNext[a.feed]
		*f = max(*f, p.Next())
		if n := uint64(p.Count); n > 0 && !h.IsEndOfSession() {
			s.msgBytes += uint64(p.Len()-wire.HeaderLen) - n*wire.MsgLenLen
			s.msgs += n
			if s.msgs > msgWindow {
				s.msgBytes, s.msgs = s.msgBytes/2, s.msgs/2
			}
		}
	}
	switch {
	case h.IsHeartbeat():
		c.heartbeat(s, h.Seq, p, a)
	case h.IsEndOfSession():
		c.endOfSession(s, h.Seq, a.now)
	default:
		c.data(s, p, a)
	}
}

// stats returns the counters. c.mu must be held.
func (c *core) stats() Stats {
	st := c.st
	st.Streams = len(c.list)
	st.Suppressed = c.retired.Suppressed
	st.Confirmed = c.retired.Confirmed
	st.Retries = c.retired.Retries
	for _, s := range c.list {
		if s.nak != nil {
			ns := s.nak.Stats()
			st.Suppressed += ns.Suppressed
			st.Confirmed += ns.Confirmed
			st.Retries += ns.Retries
		}
	}
	if c.backoff != nil {
		st.GroupSize, st.RepairRTT = c.backoff.Group(), c.backoff.RTT()
		st.SharedLoss, st.Backoff = c.backoff.Shared(), c.backoff.Window()
	}
	st.RecoveryP50, st.RecoveryP99, st.RecoveryMax = percentiles(c.hist)
	st.AskedP50, st.AskedP99, _ = percentiles(c.askedHist)
	st.AnsweredP50, st.AnsweredP99, _ = percentiles(c.answeredHist)
	if len(c.ask.addrs) > 0 {
		st.Asking = c.ask.addrs[c.ask.cur]
	}
	st.Failovers = c.ask.switches
	return st
}

// streamStats returns every stream's state, by source then session.
// c.mu must be held.
func (c *core) streamStats() []StreamStats {
	out := make([]StreamStats, 0, len(c.list))
	for _, s := range c.list {
		ss := StreamStats{
			ID: s.id, Next: s.next, Horizon: s.horizon, End: s.end,
			Delivered: s.delivered, Bytes: s.bytes, Duplicates: s.dups,
			Gaps: s.gaps, GapMessages: s.gapMsgs,
			Held: len(s.held), HeldMax: s.heldMax,
			Ended: s.ended, Superseded: s.superseded, Replaced: s.replaced, Stopped: s.stopped,
			Resyncs: s.resyncs,
			NAKs:    s.naks, NAKMessages: s.nakMsgs, Repairs: s.repairs, Recovered: s.recovered,
			LostRanges: s.lostN, LostMessages: s.lostMsgs,
		}
		if s.nak != nil {
			ss.Missing = s.nak.Pending()
			ss.Detector = s.nak.Stats()
		}
		ss.RecoveryP50, ss.RecoveryP99, ss.RecoveryMax = percentiles(s.hist)
		out = append(out, ss)
	}
	slices.SortFunc(out, func(a, b StreamStats) int {
		if c := a.ID.Source.Compare(b.ID.Source); c != 0 {
			return c
		}
		if c := bytes.Compare(a.ID.Session[:], b.ID.Session[:]); c != 0 {
			return c
		}
		return cmp.Compare(a.ID.Incarnation, b.ID.Incarnation)
	})
	return out
}
