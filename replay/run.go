package replay

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/mdbus/mdbus/journal"
)

// Source yields records in order: io.EOF after the last.
type Source interface {
	Next() (journal.Record, error)
}

// Progress describes a replay in flight (see Options.OnProgress) and,
// from Run, when it ended.
type Progress struct {
	Messages uint64         // emitted so far, over every pass
	Bytes    uint64         // message bytes emitted
	Pass     int            // 1 for the first pass of a loop
	Last     journal.Record // the last record emitted (Data is not kept)
	Elapsed  time.Duration  // since the first message
	Rate     float64        // messages per second over the last report interval
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
	// call. An error stops the replay.
	Emit func(journal.Record) error
	// EndPass, if set, is called after each complete pass (before the
	// next one of a loop): the publisher ends its session there.
	EndPass func(pass int) error
	// Loop replays the range again and again until ctx ends.
	Loop bool
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
	if o.Open == nil || o.Emit == nil {
		return Progress{}, fmt.Errorf("%w: Open and Emit are required", ErrConfig)
	}
	every := o.ProgressEvery
	if every <= 0 {
		every = time.Second
	}
	clock := p.cfg.Clock
	var pr Progress
	var begin, lastReport int64
	var lastN, passN uint64
	for pass := 1; ; pass++ {
		pr.Pass = pass
		src, err := o.Open()
		if err != nil {
			return pr, fmt.Errorf("replay: pass %d: %w", pass, err)
		}
		p.Reset()
		passN = 0
		for {
			rec, err := src.Next()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				closeSource(src)
				return pr, fmt.Errorf("replay: after %d messages: %w", pr.Messages, err)
			}
			if err := p.Wait(ctx, rec.Time); err != nil {
				closeSource(src)
				return pr, nil // interrupted: a clean stop
			}
			if err := o.Emit(rec); err != nil {
				closeSource(src)
				return pr, fmt.Errorf("replay: message %d (seq %d): %w", pr.Messages+1, rec.Seq, err)
			}
			now := clock.Now()
			if pr.Messages == 0 {
				begin, lastReport = now, now
			}
			pr.Messages++
			passN++
			pr.Bytes += uint64(len(rec.Data))
			pr.Last = journal.Record{Seq: rec.Seq, Time: rec.Time}
			if o.OnProgress != nil && now-lastReport >= int64(every) {
				pr.Elapsed = time.Duration(now - begin)
				pr.Rate = float64(pr.Messages-lastN) / (float64(now-lastReport) / 1e9)
				pr.ETA = eta(p, o, rec.Time, passN, pr.Rate)
				o.OnProgress(pr)
				lastReport, lastN = now, pr.Messages
			}
		}
		closeSource(src)
		if o.EndPass != nil {
			if err := o.EndPass(pass); err != nil {
				return pr, fmt.Errorf("replay: end of pass %d: %w", pass, err)
			}
		}
		if !o.Loop || ctx.Err() != nil {
			break
		}
		if passN == 0 {
			return pr, fmt.Errorf("replay: the range is empty; nothing to loop")
		}
	}
	if pr.Messages > 0 {
		pr.Elapsed = time.Duration(clock.Now() - begin)
	}
	pr.ETA = 0
	return pr, nil
}

// eta estimates the time left in the pass.
func eta(p *Pacer, o Options, ts int64, done uint64, rate float64) time.Duration {
	switch {
	case !p.cfg.Max && p.cfg.Rate <= 0 && o.LastTime > 0:
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
