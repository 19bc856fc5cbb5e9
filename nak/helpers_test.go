package nak

import (
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mdbus/mdbus/internal/monotime"
	"github.com/mdbus/mdbus/wire"
)

const ms = time.Millisecond

// t0 is an arbitrary start time away from zero.
const t0 = monotime.Time(1_000_000_000)

// checkInvariants verifies the internal state of d.
func (d *LossDetector) checkInvariants() error {
	var pend, doom uint64
	due := monotime.Time(math.MaxInt64)
	for i := range d.entries {
		e := &d.entries[i]
		if e.from >= e.to {
			return fmt.Errorf("entry %d empty: [%d,%d)", i, e.from, e.to)
		}
		if i > 0 && d.entries[i-1].to > e.from {
			return fmt.Errorf("entries %d and %d overlap or are unsorted", i-1, i)
		}
		if e.doomed {
			doom += e.len()
		} else {
			pend += e.len()
		}
		if !e.doomed && e.naks > 0 && e.interval != 0 && (e.interval < d.cfg.Retry || e.interval > max(d.cfg.MaxRetry, d.retryFloor)) {
			return fmt.Errorf("entry %d interval %v out of [Retry, MaxRetry]", i, e.interval)
		}
		due = min(due, d.at(e))
	}
	if pend != d.pending || doom != d.doomed {
		return fmt.Errorf("counters pending=%d doomed=%d, entries say %d, %d", d.pending, d.doomed, pend, doom)
	}
	if d.pending > d.cfg.MaxPending {
		return fmt.Errorf("pending %d > MaxPending %d", d.pending, d.cfg.MaxPending)
	}
	if len(d.entries) > 0 {
		if d.due > due {
			return fmt.Errorf("due %d later than earliest entry time %d", d.due, due)
		}
		if d.exact && d.due != due {
			return fmt.Errorf("due %d marked exact, earliest entry time %d", d.due, due)
		}
	}
	return nil
}

func requireInvariants(t testing.TB, d *LossDetector) {
	t.Helper()
	require.NoError(t, d.checkInvariants())
}

// rg is shorthand for a Range.
func rg(from, to wire.Seq) Range { return Range{from, to} }

// fixedConfig is a deterministic configuration: first NAK after delay.
func fixedConfig(delay, retry, maxRetry, deadline time.Duration) Config {
	return Config{Generator: FixedDelay(delay), Retry: retry, MaxRetry: maxRetry, Deadline: deadline}
}

// event is something Poll returned, for timing tables.
type event struct {
	at   time.Duration // since t0
	kind string        // "req" or "lost"
	r    Range
}

func (e event) String() string { return fmt.Sprintf("%v %s %v", e.at, e.kind, e.r) }

// drain polls d at every time Next reports until it is empty or limit
// polls were made, and returns what Poll returned.
func drain(t testing.TB, d *LossDetector, limit int) []event {
	t.Helper()
	var evs []event
	var reqs, lost []Range
	for range limit {
		at, ok := d.Next()
		if !ok {
			return evs
		}
		reqs, lost = d.Poll(at, reqs[:0], lost[:0])
		require.False(t, len(reqs) == 0 && len(lost) == 0, "Poll at Next()=%v did nothing", at.Sub(t0))
		for _, r := range reqs {
			evs = append(evs, event{at.Sub(t0), "req", r})
		}
		for _, r := range lost {
			evs = append(evs, event{at.Sub(t0), "lost", r})
		}
		requireInvariants(t, d)
	}
	t.Fatalf("detector not drained after %d polls", limit)
	return nil
}
