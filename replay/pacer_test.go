package replay

import (
	"context"
	"io"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/mdbus/mdbus/journal"
	"github.com/stretchr/testify/require"
)

// fakeClock advances only when the pacer sleeps or yields. Each Sleep
// oversleeps by a random amount up to late, as a loaded machine's timers do.
type fakeClock struct {
	now   int64
	late  time.Duration
	rng   *rand.Rand
	yield time.Duration
}

func (c *fakeClock) Now() int64 { return c.now }
func (c *fakeClock) Sleep(ctx context.Context, d time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	c.now += int64(d)
	if c.late > 0 {
		c.now += c.rng.Int64N(int64(c.late))
	}
	return nil
}
func (c *fakeClock) Yield() { c.now += int64(c.yield) }

// records returns n records whose timestamps step by random gaps up to
// maxGap, from a large epoch value.
func records(n int, maxGap time.Duration, seed uint64) []journal.Record {
	rng := rand.New(rand.NewPCG(seed, 1))
	recs := make([]journal.Record, n)
	ts := int64(1_700_000_000_000_000_000)
	for i := range recs {
		recs[i] = journal.Record{Seq: 1 + uint64ToSeq(i), Time: ts, Data: []byte{byte(i)}}
		ts += rng.Int64N(int64(maxGap))
	}
	return recs
}

type sliceSource struct {
	recs []journal.Record
	i    int
}

func (s *sliceSource) Next() (journal.Record, error) {
	if s.i >= len(s.recs) {
		return journal.Record{}, io.EOF
	}
	s.i++
	return s.recs[s.i-1], nil
}

// TestPacerNoDrift: every message is emitted at start + (ts-ts0)/speed
// within one yield step, although every timer wakes late by up to the
// spin margin; and with wake-ups later than the margin, the error of a
// message never exceeds one wake-up's lateness: it does not accumulate.
func TestPacerNoDrift(t *testing.T) {
	for _, tc := range []struct {
		name     string
		speed    float64
		late     time.Duration
		maxError time.Duration
	}{
		{"recorded pace, late within spin", 1, 150 * time.Microsecond, time.Microsecond},
		{"speed 10, late within spin", 10, 150 * time.Microsecond, time.Microsecond},
		{"speed 0.5, late beyond spin", 0.5, 3 * time.Millisecond, 3 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := &fakeClock{now: 42, late: tc.late, rng: rand.New(rand.NewPCG(7, 7)), yield: time.Microsecond}
			recs := records(20_000, 5*time.Millisecond, 3)
			var worst time.Duration
			var start int64
			pr, err := Run(context.Background(), Config{Speed: tc.speed, Clock: clk}, Options{
				Open: func() (Source, error) { return &sliceSource{recs: recs}, nil },
				Emit: func(r journal.Record) error {
					if start == 0 {
						start = clk.now
					}
					want := start + int64(float64(r.Time-recs[0].Time)/tc.speed)
					worst = max(worst, time.Duration(clk.now-want))
					require.GreaterOrEqual(t, clk.now, want, "seq %d emitted early", r.Seq)
					return nil
				},
			})
			require.NoError(t, err)
			require.Equal(t, uint64(len(recs)), pr.Messages)
			require.LessOrEqual(t, worst, tc.maxError)
			// The whole replay lasts the recorded span scaled, plus at most one wake-up.
			span := time.Duration(float64(recs[len(recs)-1].Time-recs[0].Time) / tc.speed)
			require.InDelta(t, float64(span), float64(pr.Elapsed), float64(tc.maxError)+1)
		})
	}
}

func TestPacerRateAndMax(t *testing.T) {
	clk := &fakeClock{yield: time.Microsecond}
	recs := records(1000, time.Second, 5) // recorded pace would take minutes
	var times []int64
	pr, err := Run(context.Background(), Config{Rate: 1000, Clock: clk}, Options{
		Open: func() (Source, error) { return &sliceSource{recs: recs}, nil },
		Emit: func(journal.Record) error { times = append(times, clk.now); return nil },
	})
	require.NoError(t, err)
	require.Equal(t, uint64(1000), pr.Messages)
	for i, at := range times {
		require.InDelta(t, float64(times[0]+int64(i)*int64(time.Millisecond)), float64(at), float64(time.Microsecond))
	}

	clk = &fakeClock{}
	pr, err = Run(context.Background(), Config{Max: true, Clock: clk}, Options{
		Open: func() (Source, error) { return &sliceSource{recs: recs}, nil },
		Emit: func(journal.Record) error { return nil },
	})
	require.NoError(t, err)
	require.Equal(t, uint64(1000), pr.Messages)
	require.Zero(t, clk.now, "--max must never wait")
}

func TestRunLoopAndCancel(t *testing.T) {
	clk := &fakeClock{yield: time.Microsecond}
	recs := records(10, time.Millisecond, 9)
	ctx, cancel := context.WithCancel(context.Background())
	var passes []int
	var seqs []uint64
	pr, err := Run(ctx, Config{Clock: clk}, Options{
		Loop: true,
		Open: func() (Source, error) { return &sliceSource{recs: recs}, nil },
		Emit: func(r journal.Record) error {
			seqs = append(seqs, uint64(r.Seq))
			if len(seqs) == 25 {
				cancel()
			}
			return nil
		},
		EndPass: func(p int) error { passes = append(passes, p); return nil },
	})
	require.NoError(t, err, "a cancelled replay stops cleanly")
	require.Equal(t, uint64(25), pr.Messages)
	require.Equal(t, []int{1, 2}, passes)
	require.Equal(t, 3, pr.Pass)
	for i, s := range seqs {
		require.Equal(t, uint64(i%10+1), s)
	}
}

func TestProgress(t *testing.T) {
	clk := &fakeClock{yield: time.Microsecond}
	recs := records(5000, 2*time.Millisecond, 11) // ~5 s recorded
	var reports []Progress
	_, err := Run(context.Background(), Config{Clock: clk}, Options{
		Open:       func() (Source, error) { return &sliceSource{recs: recs}, nil },
		Emit:       func(journal.Record) error { return nil },
		OnProgress: func(p Progress) { reports = append(reports, p) },
		LastTime:   recs[len(recs)-1].Time,
	})
	require.NoError(t, err)
	require.GreaterOrEqual(t, len(reports), 3)
	for _, r := range reports {
		require.Greater(t, r.Rate, 0.0)
		left := time.Duration(recs[len(recs)-1].Time - r.Last.Time)
		require.Equal(t, left, r.ETA)
	}
}

func TestConfigErrors(t *testing.T) {
	for _, c := range []Config{{Speed: -1}, {Rate: -5}} {
		_, err := NewPacer(c)
		require.ErrorIs(t, err, ErrConfig)
	}
}
