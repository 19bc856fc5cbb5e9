package resume

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"sync"
	"sync/atomic"

	"github.com/mdbus/mdbus/internal/cfgcheck"
	"github.com/mdbus/mdbus/journal"
	"github.com/mdbus/mdbus/subscriber"
	"github.com/mdbus/mdbus/wire"
)

// Defaults of Config.
const (
	DefaultMaxBuffered      = 1 << 20
	DefaultMaxBufferedBytes = 256 << 20
)

// ErrConfig wraps every invalid Config.
var ErrConfig = errors.New("resume: invalid config")

// Config configures a Consumer. Feed.Group and OnMessage are required.
//
// One rule for the values of every field, here, in CheckpointConfig and
// in the Feed's subscriber.Config: the zero value means the default. No
// field of this package has a "none": a negative value is invalid, and
// New and OpenCheckpoint return an error wrapping ErrConfig that names
// it.
type Config struct {
	// Feed is the live subscription. Its StartSeq, OnMessage and OnEnd
	// are the consumer's (it joins live and decides per stream where to
	// start); its OnLoss reports live losses; its Retransmitter, when
	// set, also serves the history (RequestHistory), and so do its
	// Backups, in turn, for what it did not have.
	Feed subscriber.Config
	// Checkpoint, when not nil, gives each known session's restart point
	// and records every delivery.
	Checkpoint *Checkpoint
	// Start is where a session the checkpoint does not know starts;
	// default live.
	Start Start
	// Journal, when not nil, serves history from disk before any
	// retransmitter, and maps a StartTime to a sequence (required for it).
	Journal *journal.Journal
	// History, when not empty, replaces the default history sources
	// (the Journal, then RequestHistory{Feed.Retransmitter}, then one
	// for each of Feed.Backups).
	History []History
	// MaxBuffered and MaxBufferedBytes bound the live messages held per
	// stream while its history is fetched; defaults DefaultMaxBuffered
	// and DefaultMaxBufferedBytes. When full, the held messages are
	// dropped and fetched as history too (the catch-up runs longer; no
	// message is lost while the history source has them).
	MaxBuffered      int
	MaxBufferedBytes int
	// OnMessage receives every message of every stream, history and live,
	// in sequence order per stream, once per sequence, from one goroutine
	// at a time. Data is valid only until it returns. Required.
	OnMessage func(subscriber.Message)
	// OnEnd is called after the last message of a session that ended.
	OnEnd func(subscriber.StreamID, wire.Seq)
	// Logger; default discard.
	Logger *slog.Logger
}

// withDefaults checks c and returns it with defaults applied.
func (c Config) withDefaults() (Config, error) {
	if c.OnMessage == nil {
		return c, fmt.Errorf("%w: OnMessage is required", ErrConfig)
	}
	if c.Start.Kind == StartTime && c.Journal == nil {
		return c, fmt.Errorf("%w: a start time needs a journal to find its sequence", ErrConfig)
	}
	if err := cfgcheck.Negative(ErrConfig, cfgcheck.F("MaxBuffered", c.MaxBuffered), cfgcheck.F("MaxBufferedBytes", c.MaxBufferedBytes)); err != nil {
		return c, err
	}
	c.MaxBuffered = cmp.Or(c.MaxBuffered, DefaultMaxBuffered)
	c.MaxBufferedBytes = cmp.Or(c.MaxBufferedBytes, DefaultMaxBufferedBytes)
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c, nil
}

// Stats count a Consumer's deliveries.
type Stats struct {
	History     uint64 // messages delivered from history
	Live        uint64 // messages delivered from the live feed
	Skipped     uint64 // live messages before the start position, not delivered
	CatchUps    uint64 // streams that started with a catch-up
	Overflows   uint64 // times a catch-up's live buffer filled and was dropped
	BufferedMax int    // most live messages held by one catch-up
	LostHistory uint64 // messages no history source had (reported with OnLoss)
	Err         error  // the first checkpoint error, or history error that left a range unfetched (one a later source covered is only logged)
}

// Consumer delivers a feed from a start position: for each stream it
// decides where to start (its checkpoint, else Config.Start), fetches the
// messages between that and the first live one from the history sources
// while holding the live feed in a bounded buffer, then switches to live:
// every message once, in order, with no gap or duplicate at the switch.
//
// # Why not subscriber.Config.StartSeq
//
// A positive StartSeq makes the first live packet a gap that NAK recovery
// fills. That carries a short catch-up, but a long one breaks its bounds:
// a gap beyond NAK.MaxPending (65,536 messages) is declared lost at once,
// a first packet beyond MaxGap (1<<20) is dropped as a sequence jump, and
// the reorder buffer (131,072 packets, 32 MiB) fills while the repairs are fetched
// at the retransmitter's rate limit. The consumer fetches the history
// itself, at its own pace, with no such bound on its depth.
type Consumer struct {
	cfg     Config
	sub     *subscriber.Subscriber
	sources []History
	history atomic.Uint64 // Stats.History
	ctx     context.Context
	cancel  context.CancelFunc
	wg      sync.WaitGroup

	mu      sync.Mutex // streams, stats; taken before dmu
	streams map[subscriber.StreamID]*cstream
	st      Stats

	dmu sync.Mutex // serialises OnMessage, OnEnd, OnLoss and checkpoint updates

	errMu sync.Mutex
	err   error

	closeOnce sync.Once
	closeErr  error
}

// cstream is a stream's delivery state.
type cstream struct {
	id       subscriber.StreamID
	next     wire.Seq // next sequence to deliver
	catching bool     // history is being fetched; live messages go to buf
	target   wire.Seq // while catching: the first live sequence held (history ends before it)
	buf      []held
	slab     []byte   // the held messages' bytes
	end      wire.Seq // an end of session heard while catching up
}

type held struct {
	seq      wire.Seq
	off, len int
}

// New starts a consumer.
func New(cfg Config) (*Consumer, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	c := &Consumer{cfg: cfg, streams: map[subscriber.StreamID]*cstream{}, sources: cfg.History}
	if len(c.sources) == 0 {
		if cfg.Journal != nil {
			c.sources = append(c.sources, JournalHistory{J: cfg.Journal})
		}
		if cfg.Feed.Recovery.Retransmitter.IsValid() {
			c.sources = append(c.sources, RequestHistory{Addr: cfg.Feed.Recovery.Retransmitter})
			for _, b := range cfg.Feed.Recovery.Backups {
				c.sources = append(c.sources, RequestHistory{Addr: b})
			}
		}
	}
	c.ctx, c.cancel = context.WithCancel(context.Background())
	fc := cfg.Feed
	fc.StartSeq = 0 // join live; the consumer decides where each stream starts
	fc.OnMessage = c.onLive
	fc.OnEnd = c.onEnd
	if on := cfg.Feed.OnLoss; on != nil {
		fc.OnLoss = func(l subscriber.Loss) {
			c.dmu.Lock()
			defer c.dmu.Unlock()
			on(l)
		}
	}
	sub, err := subscriber.New(fc)
	if err != nil {
		c.cancel()
		return nil, fmt.Errorf("resume: %w", err)
	}
	c.sub = sub
	return c, nil
}

// start decides where stream id starts, given that its first live
// message is seq.
func (c *Consumer) start(id subscriber.StreamID, seq wire.Seq) wire.Seq {
	if cp := c.cfg.Checkpoint; cp != nil {
		if src, next, ok := cp.Position(id.Session); ok {
			if src.IsValid() && id.Source.IsValid() && src != id.Source {
				// The session restarted (a new incarnation from a new
				// source port): everything of it is new.
				c.cfg.Logger.Info("resume: session has a new source since the checkpoint; from its start",
					"stream", id, "checkpoint source", src)
				return 1
			}
			return next
		}
	}
	switch c.cfg.Start.Kind {
	case StartSession:
		return 1
	case StartSeq:
		return c.cfg.Start.Seq
	case StartTime:
		if s, ok := c.seqAtTime(id.Session, c.cfg.Start.Time); ok {
			return s
		}
	}
	return seq
}

// seqAtTime finds the first journaled sequence of session at or after ns.
func (c *Consumer) seqAtTime(s wire.Session, ns int64) (wire.Seq, bool) {
	id, ok := c.cfg.Journal.Latest(s, netip.AddrPort{})
	if !ok {
		return 0, false
	}
	r, err := c.cfg.Journal.OpenReader(id)
	if err != nil {
		return 0, false
	}
	defer r.Close()
	if err := r.SeekTime(ns); err != nil {
		return 0, false
	}
	rec, err := r.Next()
	if err != nil {
		return 0, false
	}
	return rec.Seq, true
}

// onLive receives the live feed (the subscriber's goroutine, its lock
// held).
func (c *Consumer) onLive(m subscriber.Message) {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.streams[m.Stream]
	if s == nil {
		s = c.newStream(m.Stream, m.Seq)
	}
	if s.catching {
		if len(s.buf) >= c.cfg.MaxBuffered || len(s.slab)+len(m.Data) > c.cfg.MaxBufferedBytes {
			// Full: drop what is held; the catch-up fetches it as history.
			s.buf, s.slab = s.buf[:0], s.slab[:0]
			c.st.Overflows++
		}
		if len(s.buf) == 0 {
			s.target = m.Seq
		}
		s.buf = append(s.buf, held{seq: m.Seq, off: len(s.slab), len: len(m.Data)})
		s.slab = append(s.slab, m.Data...)
		c.st.BufferedMax = max(c.st.BufferedMax, len(s.buf))
		return
	}
	if m.Seq < s.next {
		c.st.Skipped++
		return
	}
	c.dmu.Lock()
	c.deliver(s, m.Seq, m.Data)
	c.dmu.Unlock()
	c.st.Live++
}

// newStream starts the state of stream id, whose first live sequence is
// first, and its catch-up when it starts before first. c.mu must be held.
func (c *Consumer) newStream(id subscriber.StreamID, first wire.Seq) *cstream {
	s := &cstream{id: id, next: c.start(id, first), end: wire.InvalidSeq}
	c.streams[id] = s
	if s.next < first {
		s.catching, s.target = true, first
		c.st.CatchUps++
		c.wg.Add(1)
		go c.catchUp(s)
	}
	return s
}

// deliver hands one message to the application and the checkpoint. c.dmu
// must be held.
func (c *Consumer) deliver(s *cstream, seq wire.Seq, data []byte) {
	c.cfg.OnMessage(subscriber.Message{Stream: s.id, Seq: seq, Data: data})
	s.next = seq + 1
	if cp := c.cfg.Checkpoint; cp != nil {
		if err := cp.Delivered(s.id.Session, s.id.Source, seq); err != nil {
			c.latch(err)
		}
	}
}

func (c *Consumer) latch(err error) {
	c.errMu.Lock()
	if c.err == nil {
		c.err = err
		c.cfg.Logger.Error("resume: delivery", "err", err)
	}
	c.errMu.Unlock()
}

func (c *Consumer) onEnd(id subscriber.StreamID, next wire.Seq) {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.streams[id]
	if s == nil {
		// The first thing heard of the stream is its end (the consumer
		// restarted after the publisher finished): its history may still
		// be due.
		s = c.newStream(id, next)
	}
	if s.catching {
		s.end = next
		return
	}
	if c.cfg.OnEnd != nil {
		c.dmu.Lock()
		c.cfg.OnEnd(id, next)
		c.dmu.Unlock()
	}
}

// catchUp fetches the history of s from s.next to its first held live
// message, then delivers the held messages and switches s to live. It runs
// on its own goroutine, owned by the Consumer.
func (c *Consumer) catchUp(s *cstream) {
	defer c.wg.Done()
	emit := func(seq wire.Seq, msg []byte) error {
		c.dmu.Lock()
		defer c.dmu.Unlock()
		if seq != s.next {
			return fmt.Errorf("resume: history of %s gave sequence %d, want %d", s.id, seq, s.next)
		}
		c.deliver(s, seq, msg)
		c.history.Add(1) // an atomic: mu is taken before dmu, never after
		return nil
	}
	for {
		c.mu.Lock()
		target := s.target
		if s.next >= target {
			c.switchLive(s)
			c.mu.Unlock()
			return
		}
		c.mu.Unlock()
		pos := s.next
		var failed error // the last source's failure, reported only if nobody covered for it
		for _, h := range c.sources {
			if pos >= target {
				break
			}
			var err error
			pos, err = h.Fetch(c.ctx, s.id.Session, pos, target, emit)
			if c.ctx.Err() != nil {
				return
			}
			if err != nil {
				failed = err
				c.cfg.Logger.Warn("resume: history source failed; trying the next", "stream", s.id, "err", err)
			}
		}
		if pos < target && failed != nil {
			c.latch(failed)
		}
		if pos < target {
			// Nobody holds [pos, target): report it and go on after it.
			l := subscriber.Loss{Stream: s.id, From: pos, To: target}
			c.mu.Lock()
			c.st.LostHistory += uint64(target - pos)
			c.mu.Unlock()
			c.dmu.Lock()
			if on := c.cfg.Feed.OnLoss; on != nil {
				on(l)
			}
			s.next = target
			c.dmu.Unlock()
		}
	}
}

// switchLive delivers the held live messages of s from s.next on and
// makes s live. c.mu must be held.
func (c *Consumer) switchLive(s *cstream) {
	c.dmu.Lock()
	defer c.dmu.Unlock()
	for _, h := range s.buf {
		if h.seq < s.next {
			continue
		}
		c.deliver(s, h.seq, s.slab[h.off:h.off+h.len])
		c.st.Live++
	}
	s.buf, s.slab, s.catching = nil, nil, false
	if s.end != wire.InvalidSeq && c.cfg.OnEnd != nil {
		c.cfg.OnEnd(s.id, s.end)
	}
}

// Stats returns the counters.
func (c *Consumer) Stats() Stats {
	c.mu.Lock()
	st := c.st
	c.mu.Unlock()
	st.History = c.history.Load()
	c.errMu.Lock()
	st.Err = c.err
	c.errMu.Unlock()
	return st
}

// FeedStats are the live subscriber's counters.
func (c *Consumer) FeedStats() subscriber.Stats { return c.sub.Stats() }

// Close stops the feed and any catch-up, waits for them, and saves the
// checkpoint (the caller closes it). Later calls return the same error.
func (c *Consumer) Close() error {
	c.closeOnce.Do(func() {
		err := c.sub.Close()
		c.cancel()
		c.wg.Wait()
		if cp := c.cfg.Checkpoint; cp != nil {
			err = errors.Join(err, cp.Save())
		}
		c.closeErr = err
	})
	return c.closeErr
}
