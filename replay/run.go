package replay

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/mdbus/mdbus/journal"
	"github.com/mdbus/mdbus/wire"
)

// Source yields records in order: io.EOF after the last.
type Source interface {
	Next() (journal.Record, error)
}

// Progress describes a replay in flight (see Options.OnProgress) and,
// from Run, when it ended.
type Progress struct {
	Messages uint64 // emitted so far, over every pass
	Bytes    uint64 // message bytes emitted
	// Packets counts the packets emitted (see Options.EmitPacket; one per
	// message with Emit) and WireBytes their MoldUDP64 bytes (header and
	// message lengths included: the UDP payload).
	Packets   uint64
	WireBytes uint64
	Pass      int            // 1 for the first pass of a loop
	Last      journal.Record // the last record emitted (Data is not kept)
	Elapsed   time.Duration  // since the first message
	Rate      float64        // messages per second over the last report interval
	// ETA is the time left in this pass when the range's size is known
	// (Options.Total or Options.LastTime), else -1.
	ETA time.Duration
}

// Options configure Run beside the pace.
type Options struct {
	// Open returns a fresh Source positioned at the range start; Run
	// calls it once per pass. Required.
	Open func() (Source, error)
	// Emit sends or prints one record. Its Data is only valid during the
	// call. An error stops the replay. One of Emit and EmitPacket is
	// required.
	Emit func(journal.Record) error
	// EmitPacket, instead of Emit, sends the records of one packet
	// together: consecutive records that share a timestamp (the journal
	// stamps every message of a received packet alike), as many as fit
	// in PayloadSize bytes of MoldUDP64 packet; under Config.Rate each
	// record is its own packet. The records and their Data are only
	// valid during the call.
	EmitPacket func([]journal.Record) error
	// PayloadSize bounds the packets EmitPacket is given, in MoldUDP64
	// bytes; default wire.DefaultPayloadSizeIPv4.
	PayloadSize int
	// BeginPass, if set, is called before the first record of each pass
	// is paced (the timeline is anchored after it returns, so what it
	// costs, such as creating a publisher, does not delay the first
	// message).
	BeginPass func(pass int, first journal.Record) error
	// EndPass, if set, is called after each complete pass (before the
	// next one of a loop): the publisher ends its session there.
	EndPass func(pass int) error
	// Loop replays the range again and again until ctx ends.
	Loop bool
	// Passes, when above 1 (and Loop is not set), replays the range that
	// many times.
	Passes int
	// Total is the number of records in a pass, when known (ETA).
	Total uint64
	// LastTime is the timestamp of the range's last record, when known
	// (ETA at the recorded pace or a speed factor).
	LastTime int64
	// OnProgress, if set, is called about every ProgressEvery (default
	// 1 s) on Run's goroutine, between two messages.
	OnProgress    func(Progress)
	ProgressEvery time.Duration
}

// Run replays with the pace of cfg until the range ends (or, with Loop,
// until ctx ends), and returns the final Progress. A cancelled ctx stops it
// cleanly: the error is nil and the Progress says how far it got.
func Run(ctx context.Context, cfg Config, o Options) (Progress, error) {
	p, err := NewPacer(cfg)
	if err != nil {
		return Progress{}, err
	}
	if o.Open == nil || (o.Emit == nil) == (o.EmitPacket == nil) {
		return Progress{}, fmt.Errorf("%w: Open and one of Emit and EmitPacket are required", ErrConfig)
	}
	if o.PayloadSize <= 0 {
		o.PayloadSize = wire.DefaultPayloadSizeIPv4
	}
	every := o.ProgressEvery
	if every <= 0 {
		every = time.Second
	}
	r := runner{p: p, o: o, every: int64(every), clock: p.cfg.Clock}
	for pass := 1; ; pass++ {
		r.pr.Pass = pass
		src, err := o.Open()
		if err != nil {
			return r.pr, fmt.Errorf("replay: pass %d: %w", pass, err)
		}
		p.Reset()
		r.passN = 0
		stop, err := r.pass(ctx, src, pass)
		closeSource(src)
		if err != nil || stop {
			return r.pr, err
		}
		if o.EndPass != nil {
			if err := o.EndPass(pass); err != nil {
				return r.pr, fmt.Errorf("replay: end of pass %d: %w", pass, err)
			}
		}
		if !o.Loop && pass >= o.Passes || ctx.Err() != nil {
			break
		}
		if r.passN == 0 {
			return r.pr, fmt.Errorf("replay: the range is empty; nothing to loop")
		}
	}
	if r.pr.Messages > 0 {
		r.pr.Elapsed = time.Duration(r.last - r.begin)
	}
	r.pr.ETA = 0
	return r.pr, nil
}

// runner is the state of one Run.
type runner struct {
	p     *Pacer
	o     Options
	clock Clock
	every int64
	pr    Progress
	passN uint64
	// begin and last are the clock times of the first and the latest
	// emission; lastReport and lastN those of the latest progress report.
	begin, last, lastReport int64
	lastN                   uint64
	// The packet being gathered (EmitPacket): its records, their Data
	// copied into arena.
	pkt   []journal.Record
	arena []byte
	size  int
}

// pass replays one pass of src. stop is set when ctx ended (a clean
// stop) or the replay must not go on.
func (r *runner) pass(ctx context.Context, src Source, pass int) (stop bool, err error) {
	r.pkt, r.arena, r.size = r.pkt[:0], r.arena[:0], 0
	first := true
	for {
		rec, err := src.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return true, fmt.Errorf("replay: after %d messages: %w", r.pr.Messages, err)
		}
		if first {
			first = false
			if r.o.BeginPass != nil {
				if err := r.o.BeginPass(pass, rec); err != nil {
					return true, fmt.Errorf("replay: pass %d: %w", pass, err)
				}
			}
		}
		if r.o.EmitPacket == nil {
			if err := r.p.Wait(ctx, rec.Time); err != nil {
				return true, nil // interrupted: a clean stop
			}
			if err := r.o.Emit(rec); err != nil {
				return true, fmt.Errorf("replay: message %d (seq %d): %w", r.pr.Messages+1, rec.Seq, err)
			}
			r.emitted(rec, 1, len(rec.Data), wire.HeaderLen+wire.MsgLenLen+len(rec.Data))
			continue
		}
		n := wire.MsgLenLen + len(rec.Data)
		if len(r.pkt) > 0 && (rec.Time != r.pkt[0].Time || r.size+n > r.o.PayloadSize || len(r.pkt) == wire.MaxCount-1 || r.p.cfg.Rate > 0) {
			if stop, err := r.flush(ctx); stop || err != nil {
				return stop, err
			}
		}
		if len(r.pkt) == 0 {
			r.size = wire.HeaderLen
		}
		off := len(r.arena)
		r.arena = append(r.arena, rec.Data...)
		rec.Data = r.arena[off:len(r.arena):len(r.arena)]
		r.pkt = append(r.pkt, rec)
		r.size += n
	}
	if len(r.pkt) > 0 {
		return r.flush(ctx)
	}
	return false, nil
}

// flush paces and emits the gathered packet.
func (r *runner) flush(ctx context.Context) (stop bool, err error) {
	pkt := r.pkt
	if err := r.p.WaitPacket(ctx, pkt[0].Time, len(pkt), r.size); err != nil {
		return true, nil // interrupted: a clean stop
	}
	// The arena may have been reallocated after the records were taken:
	// point their Data at the current one.
	off := 0
	for i := range pkt {
		n := len(pkt[i].Data)
		pkt[i].Data = r.arena[off : off+n : off+n]
		off += n
	}
	if err := r.o.EmitPacket(pkt); err != nil {
		return true, fmt.Errorf("replay: message %d (seq %d): %w", r.pr.Messages+1, pkt[0].Seq, err)
	}
	r.emitted(pkt[len(pkt)-1], len(pkt), len(r.arena), r.size)
	r.pkt, r.arena, r.size = r.pkt[:0], r.arena[:0], 0
	return false, nil
}

// emitted accounts for a packet just emitted, of msgs messages holding
// data bytes in size packet bytes, whose last record is rec, and reports
// progress when due.
func (r *runner) emitted(rec journal.Record, msgs, data, size int) {
	now := r.clock.Now()
	if r.pr.Messages == 0 {
		r.begin, r.lastReport = now, now
	}
	r.last = now
	r.pr.Messages += uint64(msgs)
	r.passN += uint64(msgs)
	r.pr.Packets++
	r.pr.WireBytes += uint64(size)
	r.pr.Bytes += uint64(data)
	r.pr.Last = journal.Record{Seq: rec.Seq, Time: rec.Time}
	if r.o.OnProgress != nil && now-r.lastReport >= r.every {
		r.pr.Elapsed = time.Duration(now - r.begin)
		r.pr.Rate = float64(r.pr.Messages-r.lastN) / (float64(now-r.lastReport) / 1e9)
		r.pr.ETA = eta(r.p, r.o, rec.Time, r.passN, r.pr.Rate)
		r.o.OnProgress(r.pr)
		r.lastReport, r.lastN = now, r.pr.Messages
	}
}

// eta estimates the time left in the pass.
func eta(p *Pacer, o Options, ts int64, done uint64, rate float64) time.Duration {
	switch {
	case p.recordedPace() && o.LastTime > 0:
		return p.Elapsed(o.LastTime) - p.Elapsed(ts)
	case o.Total > done && rate > 0:
		return time.Duration(float64(o.Total-done) / rate * 1e9)
	}
	return -1
}

func closeSource(s Source) {
	if c, ok := s.(io.Closer); ok {
		_ = c.Close()
	}
}
