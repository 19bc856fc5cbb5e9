package bench

import (
	"context"
	"errors"
)

// RunMatrix is the runs `mdbus bench throughput`, `latency` and `raw`
// make: every message size × offered rate × system (× latency mode), and
// mdbus again at each of Losses.
type RunMatrix struct {
	Systems []System
	Sizes   []Sizes
	Rates   []float64 // messages/s; 0: as fast as possible (throughput)
	// Modes are the latency modes (OneWay, RoundTrip, PingPong). A
	// PingPong (a closed loop, no offered rate) runs once per size, at
	// the first rate.
	Modes []string
	// Subscribers and Processes apply to throughput and one-way latency.
	Subscribers int
	Processes   bool
	// Losses: each lossless mdbus run is followed by one at each of these
	// fractions of datagrams dropped (none for a PingPong); nil: none.
	Losses []float64
}

// ThroughputCases expands m into throughput cases, in the order they run.
func ThroughputCases(m RunMatrix) []ThroughputCase {
	var out []ThroughputCase
	for _, sz := range m.Sizes {
		for _, r := range m.Rates {
			for _, s := range m.Systems {
				c := ThroughputCase{System: s, Sizes: sz, Rate: r, Subscribers: m.Subscribers, Processes: m.Processes}
				out = append(out, c)
				for _, loss := range m.Losses {
					if s != Mdbus {
						break
					}
					c.Loss = loss
					out = append(out, c)
				}
			}
		}
	}
	return out
}

// LatencyCases expands m into latency cases, in the order they run.
func LatencyCases(m RunMatrix) []LatencyCase {
	var out []LatencyCase
	for _, sz := range m.Sizes {
		for i, r := range m.Rates {
			for _, mode := range m.Modes {
				if mode == PingPong && i > 0 {
					continue // a closed loop has no offered rate: once per size
				}
				for _, s := range m.Systems {
					if s == RawGSO && mode != OneWay {
						continue // no ponger: one-way only
					}
					c := LatencyCase{System: s, Mode: mode, Sizes: sz, Rate: r}
					if mode == OneWay {
						c.Subscribers, c.Processes = m.Subscribers, m.Processes
					}
					out = append(out, c)
					for _, loss := range m.Losses {
						if s != Mdbus || mode == PingPong {
							break
						}
						c.Loss = loss
						out = append(out, c)
					}
				}
			}
		}
	}
	return out
}

// RunThroughput runs cases in turn and returns their errors joined. An
// interruption (ctx done) stops it before the next case, and it returns
// nil: what was measured is in the report.
func (b *Bench) RunThroughput(ctx context.Context, cases []ThroughputCase) error {
	return runCases(ctx, cases, b.Throughput)
}

// RunLatency runs cases in turn, as RunThroughput does.
func (b *Bench) RunLatency(ctx context.Context, cases []LatencyCase) error {
	return runCases(ctx, cases, b.Latency)
}

// RunCapacity searches the cells of cases in turn, as RunThroughput does,
// except that an mdbus cell and the lossy cells of the same shape that
// follow it (CapacityCases lists them so) are searched together with
// their probes interleaved (CapacityInterleaved), so that their ratio is
// measured like for like.
func (b *Bench) RunCapacity(ctx context.Context, cases []CapacityCase) error {
	return runCases(ctx, lossGroups(cases), b.CapacityInterleaved)
}

// lossGroups groups each lossless cell with the lossy cells of its shape
// that follow it; every other cell is a group of its own.
func lossGroups(cases []CapacityCase) [][]CapacityCase {
	var groups [][]CapacityCase
	for _, c := range cases {
		if n := len(groups); n > 0 && c.Loss > 0 && groups[n-1][0].Loss == 0 && sameShape(groups[n-1][0], c) {
			groups[n-1] = append(groups[n-1], c)
			continue
		}
		groups = append(groups, []CapacityCase{c})
	}
	return groups
}

// sameShape reports whether cells l and c differ in Loss at most.
func sameShape(l, c CapacityCase) bool {
	return l.System == c.System && l.Sizes == c.Sizes && l.PayloadSize == c.PayloadSize &&
		l.Subscribers == c.Subscribers && l.Processes == c.Processes && l.Search == c.Search && l.Probe == c.Probe
}

func runCases[C, R any](ctx context.Context, cases []C, run func(context.Context, C) (R, error)) error {
	var errs []error
	for _, c := range cases {
		if ctx.Err() != nil {
			return nil
		}
		if _, err := run(ctx, c); err != nil && ctx.Err() == nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
