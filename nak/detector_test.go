package nak

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mdbus/mdbus/internal/monotime"
	"github.com/mdbus/mdbus/wire"
)

func TestTimings(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  Config
		gap  Range
		want []event
	}{
		{
			name: "backoff doubles to the cap then deadline",
			cfg:  fixedConfig(1*ms, 10*ms, 40*ms, 200*ms),
			gap:  rg(10, 20),
			want: []event{
				{1 * ms, "req", rg(10, 20)},
				{11 * ms, "req", rg(10, 20)},  // +Retry
				{31 * ms, "req", rg(10, 20)},  // +2·Retry
				{71 * ms, "req", rg(10, 20)},  // +4·Retry = MaxRetry
				{111 * ms, "req", rg(10, 20)}, // capped
				{151 * ms, "req", rg(10, 20)},
				{191 * ms, "req", rg(10, 20)},
				{200 * ms, "lost", rg(10, 20)}, // first seen + Deadline, exact range
			},
		},
		{
			name: "zero delay NAKs at once",
			cfg:  fixedConfig(0, 5*ms, 5*ms, 12*ms),
			gap:  rg(1, 2),
			want: []event{
				{0, "req", rg(1, 2)},
				{5 * ms, "req", rg(1, 2)},
				{10 * ms, "req", rg(1, 2)},
				{12 * ms, "lost", rg(1, 2)},
			},
		},
		{
			name: "deadline before the first NAK: lost without asking",
			cfg:  fixedConfig(5*ms, 10*ms, 10*ms, 3*ms),
			gap:  rg(100, 300),
			want: []event{{3 * ms, "lost", rg(100, 300)}},
		},
		{
			name: "NAK due exactly at the deadline is not sent",
			cfg:  fixedConfig(2*ms, 8*ms, 8*ms, 10*ms),
			gap:  rg(7, 8),
			want: []event{
				{2 * ms, "req", rg(7, 8)},
				{10 * ms, "lost", rg(7, 8)},
			},
		},
		{
			name: "long gap split by MaxRequest at every NAK",
			cfg: Config{Generator: FixedDelay(ms), Retry: 4 * ms, MaxRetry: 4 * ms,
				Deadline: 6 * ms, MaxRequest: 1000},
			gap: rg(1, 2501),
			want: []event{
				{1 * ms, "req", rg(1, 1001)},
				{1 * ms, "req", rg(1001, 2001)},
				{1 * ms, "req", rg(2001, 2501)},
				{5 * ms, "req", rg(1, 1001)},
				{5 * ms, "req", rg(1001, 2001)},
				{5 * ms, "req", rg(2001, 2501)},
				{6 * ms, "lost", rg(1, 2501)}, // lost ranges are not split
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := NewLossDetector(tc.cfg)
			d.OnGap(t0, tc.gap)
			requireInvariants(t, d)
			require.Equal(t, tc.gap.Len(), d.Pending())
			got := drain(t, d, 100)
			require.Equal(t, tc.want, got)
			require.Zero(t, d.Pending())
			st := d.Stats()
			var reqs, msgs uint64
			for _, e := range got {
				if e.kind == "req" {
					reqs++
					msgs += e.r.Len()
				}
			}
			require.Equal(t, reqs, st.Requests)
			require.Equal(t, msgs, st.Requested)
			require.Equal(t, tc.gap.Len(), st.LostMessages)
			require.Equal(t, uint64(1), st.LostRanges)
		})
	}
}

// Poll before a NAK is due does nothing; a late Poll schedules the next
// retry from the time it actually ran.
func TestPollEarlyAndLate(t *testing.T) {
	d := NewLossDetector(fixedConfig(ms, 10*ms, 80*ms, time.Second))
	d.OnGap(t0, rg(5, 6))
	var reqs, lost []Range
	reqs, lost = d.Poll(t0.Add(ms-1), reqs, lost)
	require.Empty(t, reqs)
	require.Empty(t, lost)
	reqs, _ = d.Poll(t0.Add(3*ms), reqs, lost) // 2 ms late
	require.Equal(t, []Range{rg(5, 6)}, reqs)
	at, ok := d.Next()
	require.True(t, ok)
	require.Equal(t, t0.Add(13*ms), at)
	reqs, _ = d.Poll(at-1, reqs[:0], lost)
	require.Empty(t, reqs)
	require.Equal(t, uint64(1), d.Stats().NAKs)
}

// The first NAK of a gap falls in [t, t+Delay) with the default uniform
// generator, and its delays spread over the window.
func TestFirstNAKWithinDelay(t *testing.T) {
	const delay = 4 * ms
	d := NewLossDetector(Config{Delay: delay, Seed: 1})
	var lo, hi time.Duration = delay, 0
	for i := range 500 {
		d.Reset()
		now := t0.Add(time.Duration(i) * time.Second)
		d.OnGap(now, rg(wire.Seq(i+1), wire.Seq(i+2)))
		at, ok := d.Next()
		require.True(t, ok)
		dl := at.Sub(now)
		require.GreaterOrEqual(t, dl, time.Duration(0))
		require.Less(t, dl, delay)
		lo, hi = min(lo, dl), max(hi, dl)
		reqs, _ := d.Poll(at-1, nil, nil)
		require.Empty(t, reqs)
		reqs, _ = d.Poll(at, nil, nil)
		require.Equal(t, []Range{rg(wire.Seq(i+1), wire.Seq(i+2))}, reqs)
	}
	require.Less(t, lo, delay/10)
	require.Greater(t, hi, delay*9/10)
}

func TestSplitAndJoin(t *testing.T) {
	for _, tc := range []struct {
		name   string
		maxReq int
		gaps   []Range // all reported at t0
		want   []Range // the first Poll's requests
	}{
		{"single under limit", 10, []Range{rg(1, 8)}, []Range{rg(1, 8)}},
		{"exact multiple", 4, []Range{rg(1, 9)}, []Range{rg(1, 5), rg(5, 9)}},
		{"adjacent gaps joined", 100, []Range{rg(1, 5), rg(5, 9)}, []Range{rg(1, 9)}},
		// A range joins the request before it only whole: each tracked
		// range is asked in one request, so an answer that fills it
		// whole is told from a partial one.
		{"adjacent gaps not joined past the limit", 6, []Range{rg(1, 5), rg(5, 9)}, []Range{rg(1, 5), rg(5, 9)}},
		{"disjoint gaps kept apart", 100, []Range{rg(1, 5), rg(6, 9)}, []Range{rg(1, 5), rg(6, 9)}},
		{"limit one", 1, []Range{rg(3, 6)}, []Range{rg(3, 4), rg(4, 5), rg(5, 6)}},
		{"wire.MaxCount cap", 1 << 20, []Range{rg(1, 2*wire.MaxCount+11)},
			[]Range{rg(1, wire.MaxCount+1), rg(wire.MaxCount+1, 2*wire.MaxCount+1), rg(2*wire.MaxCount+1, 2*wire.MaxCount+11)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := NewLossDetector(Config{Generator: FixedDelay(0), MaxRequest: tc.maxReq, MaxPending: 1 << 20})
			for _, g := range tc.gaps {
				d.OnGap(t0, g)
			}
			reqs, lost := d.Poll(t0, nil, nil)
			require.Empty(t, lost)
			require.Equal(t, tc.want, reqs)
			for _, r := range reqs {
				require.LessOrEqual(t, r.Len(), uint64(d.Config().MaxRequest))
				require.LessOrEqual(t, r.Len(), uint64(wire.MaxCount))
			}
			require.Equal(t, uint64(len(tc.want)), d.Stats().Requests)
			require.Equal(t, uint64(len(tc.gaps)), d.Stats().NAKs)
		})
	}
}

// Requests appended to a non-empty reqs are not joined with what the
// caller already had there.
func TestPollAppendsWithoutJoiningCallerRanges(t *testing.T) {
	d := NewLossDetector(Config{Generator: FixedDelay(0)})
	d.OnGap(t0, rg(5, 9))
	reqs, _ := d.Poll(t0, []Range{rg(1, 5)}, nil)
	require.Equal(t, []Range{rg(1, 5), rg(5, 9)}, reqs)
	require.Equal(t, uint64(1), d.Stats().Requests)
}

func TestPartialFills(t *testing.T) {
	d := NewLossDetector(fixedConfig(ms, 10*ms, 100*ms, time.Second))
	d.OnGap(t0, rg(10, 30))
	reqs, _ := d.Poll(t0.Add(ms), nil, nil)
	require.Equal(t, []Range{rg(10, 30)}, reqs)

	type fill struct {
		at     time.Duration
		r      Range
		filled uint64
		age    time.Duration
		left   []Range
		next   time.Duration // the earliest NAK due after the fill
	}
	// Pieces keep the timers of the whole (next NAK at 1+10 ms), but a
	// piece whose front was filled is asked for Continue (1 ms) plus the
	// gap delay (1 ms) later: a partial answer.
	for _, f := range []fill{
		{2 * ms, rg(15, 17), 2, 2 * ms, []Range{rg(10, 15), rg(17, 30)}, 11 * ms},            // middle: split
		{3 * ms, rg(5, 11), 1, 3 * ms, []Range{rg(11, 15), rg(17, 30)}, 5 * ms},              // head, overhanging
		{3 * ms, rg(29, 40), 1, 3 * ms, []Range{rg(11, 15), rg(17, 29)}, 5 * ms},             // tail, overhanging
		{4 * ms, rg(14, 18), 2, 4 * ms, []Range{rg(11, 14), rg(18, 29)}, 5 * ms},             // across two pieces
		{4 * ms, rg(14, 18), 0, 0, []Range{rg(11, 14), rg(18, 29)}, 5 * ms},                  // duplicate
		{4 * ms, rg(100, 200), 0, 0, []Range{rg(11, 14), rg(18, 29)}, 5 * ms},                // untracked
		{4 * ms, rg(12, 12), 0, 0, []Range{rg(11, 14), rg(18, 29)}, 5 * ms},                  // empty
		{5 * ms, rg(20, 22), 2, 5 * ms, []Range{rg(11, 14), rg(18, 20), rg(22, 29)}, 5 * ms}, // split again
		{5 * ms, rg(13, 21), 3, 5 * ms, []Range{rg(11, 13), rg(22, 29)}, 5 * ms},             // covers a piece whole
		{6 * ms, rg(0, 1000), 9, 6 * ms, nil, 0},                                             // everything
	} {
		filled, age := d.OnReceived(t0.Add(f.at), f.r)
		require.Equal(t, f.filled, filled, "fill %v", f.r)
		require.Equal(t, f.age, age, "fill %v", f.r)
		require.Equal(t, f.left, d.AppendMissing(nil), "after fill %v", f.r)
		requireInvariants(t, d)
		if f.left != nil {
			at, ok := d.Next()
			require.True(t, ok)
			require.Equal(t, t0.Add(f.next), at, "after fill %v", f.r)
		}
	}
	_, ok := d.Next()
	require.False(t, ok)
	st := d.Stats()
	require.Equal(t, uint64(20), st.Filled)
	require.Zero(t, st.Suppressed)
	require.Zero(t, d.Pending())
}

// Pieces left by a partial fill are retried on the original schedule, as
// separate ranges.
func TestPartialFillKeepsBackoff(t *testing.T) {
	d := NewLossDetector(fixedConfig(0, 10*ms, 100*ms, time.Second))
	d.OnGap(t0, rg(1, 11))
	reqs, _ := d.Poll(t0, nil, nil)
	require.Equal(t, []Range{rg(1, 11)}, reqs)
	reqs, _ = d.Poll(t0.Add(10*ms), reqs[:0], nil)
	require.Equal(t, []Range{rg(1, 11)}, reqs)
	d.OnReceived(t0.Add(15*ms), rg(4, 6))
	reqs, _ = d.Poll(t0.Add(29*ms), reqs[:0], nil)
	require.Empty(t, reqs, "retry interval is now 20 ms")
	reqs, _ = d.Poll(t0.Add(30*ms), reqs[:0], nil)
	require.Equal(t, []Range{rg(1, 4), rg(6, 11)}, reqs)
	at, _ := d.Next()
	require.Equal(t, t0.Add(70*ms), at)
	st := d.Stats()
	require.Equal(t, uint64(4), st.NAKs) // one range twice, then two pieces once
	require.Equal(t, uint64(3), st.Retries)
}

func TestMerge(t *testing.T) {
	d := NewLossDetector(Config{Generator: FixedDelay(ms), MaxPending: 1000})
	steps := []struct {
		at      time.Duration
		gap     Range
		added   uint64
		missing []Range
	}{
		{0, rg(10, 20), 10, []Range{rg(10, 20)}},
		{1 * ms / 2, rg(15, 30), 10, []Range{rg(10, 20), rg(20, 30)}},                       // overlap: only [20,30) is new
		{1 * ms / 2, rg(10, 30), 0, []Range{rg(10, 20), rg(20, 30)}},                        // all tracked: ignored
		{1 * ms / 2, rg(12, 13), 0, []Range{rg(10, 20), rg(20, 30)}},                        // inside: ignored
		{1 * ms / 2, rg(5, 35), 10, []Range{rg(5, 10), rg(10, 20), rg(20, 30), rg(30, 35)}}, // both sides
		{1 * ms / 2, rg(40, 40), 0, []Range{rg(5, 10), rg(10, 20), rg(20, 30), rg(30, 35)}}, // empty
	}
	var total uint64
	for _, s := range steps {
		before := d.Stats()
		d.OnGap(t0.Add(s.at), s.gap)
		requireInvariants(t, d)
		total += s.added
		require.Equal(t, s.added, d.Stats().GapMessages-before.GapMessages, "gap %v", s.gap)
		require.Equal(t, s.missing, d.AppendMissing(nil), "gap %v", s.gap)
		require.Equal(t, total, d.Pending())
	}
	require.Equal(t, uint64(3), d.Stats().Gaps)
	// [10,20) keeps its timer (due at 1 ms); the later parts are due at 1.5 ms.
	reqs, _ := d.Poll(t0.Add(ms), nil, nil)
	require.Equal(t, []Range{rg(10, 20)}, reqs)
	reqs, _ = d.Poll(t0.Add(3*ms/2), nil, nil)
	require.Equal(t, []Range{rg(5, 10), rg(20, 35)}, reqs, "adjacent [20,30) and [30,35) joined")
}

func TestSuppression(t *testing.T) {
	d := NewLossDetector(fixedConfig(2*ms, 10*ms, 100*ms, time.Second))
	d.OnGap(t0, rg(10, 20))
	d.OnGap(t0, rg(30, 40))
	// A reordered packet and an A/B partner fill the first gap before its NAK.
	filled, age := d.OnReceived(t0.Add(ms/2), rg(10, 15))
	require.Equal(t, uint64(5), filled)
	require.Equal(t, ms/2, age)
	filled, _ = d.OnReceived(t0.Add(ms), rg(15, 20))
	require.Equal(t, uint64(5), filled)
	reqs, _ := d.Poll(t0.Add(2*ms), nil, nil)
	require.Equal(t, []Range{rg(30, 40)}, reqs, "only the unfilled gap is asked for")
	filled, _ = d.OnReceived(t0.Add(3*ms), rg(30, 40))
	require.Equal(t, uint64(10), filled)
	_, ok := d.Next()
	require.False(t, ok)
	st := d.Stats()
	require.Equal(t, uint64(10), st.Suppressed, "only fills before the first NAK are suppressed")
	require.Equal(t, uint64(20), st.Filled)
	require.Equal(t, uint64(1), st.NAKs)
}

func TestHugeGap(t *testing.T) {
	const huge = wire.Seq(1) << 40
	t.Run("heartbeat 2^40 ahead is declared lost, never requested", func(t *testing.T) {
		d := NewLossDetector(Config{Seed: 3}) // MaxPending default
		d.OnGap(t0, rg(1, huge+1))
		requireInvariants(t, d)
		require.Zero(t, d.Pending())
		at, ok := d.Next()
		require.True(t, ok)
		require.Equal(t, t0, at, "due at once")
		reqs, lost := d.Poll(t0, nil, nil)
		require.Empty(t, reqs)
		require.Equal(t, []Range{rg(1, huge+1)}, lost)
		_, ok = d.Next()
		require.False(t, ok)
		st := d.Stats()
		require.Equal(t, uint64(1), st.Overflows)
		require.Equal(t, uint64(huge), st.OverflowMessages)
		require.Equal(t, uint64(huge), st.LostMessages)
		require.Zero(t, st.Requested)
	})
	t.Run("tracked part keeps being repaired", func(t *testing.T) {
		d := NewLossDetector(Config{Generator: FixedDelay(ms), MaxPending: 1000})
		d.OnGap(t0, rg(1, 101))
		d.OnGap(t0.Add(ms/2), rg(50, huge))
		require.Equal(t, uint64(100), d.Pending())
		// Something inside the doomed range arrives before the Poll.
		filled, _ := d.OnReceived(t0.Add(ms/2), rg(500, 502))
		require.Equal(t, uint64(2), filled)
		reqs, lost := d.Poll(t0.Add(ms/2), nil, nil)
		require.Empty(t, reqs)
		require.Equal(t, []Range{rg(101, 500), rg(502, huge)}, lost)
		reqs, lost = d.Poll(t0.Add(ms), nil, nil)
		require.Equal(t, []Range{rg(1, 101)}, reqs)
		require.Empty(t, lost)
	})
	t.Run("requests never total more than MaxPending", func(t *testing.T) {
		const maxPending = 5000
		d := NewLossDetector(Config{Seed: 5, MaxPending: maxPending, Deadline: 100 * ms})
		next := wire.Seq(1)
		now := t0
		var overflowed []Range
		var reqs, lost []Range
		for i := range 300 {
			// A mix of plausible gaps and absurd heartbeats.
			to := next + wire.Seq(1+i*37%900)
			if i%7 == 3 {
				to = next + huge
			}
			before := d.Pending()
			d.OnGap(now, rg(next, to))
			if d.Pending() == before {
				overflowed = append(overflowed, rg(next, to))
			}
			next = to + 1
			require.LessOrEqual(t, d.Pending(), uint64(maxPending))
			now = now.Add(ms)
			reqs, lost = d.Poll(now, reqs[:0], lost[:0])
			var total uint64
			for _, r := range reqs {
				total += r.Len()
				for _, o := range overflowed {
					require.False(t, r.From < o.To && o.From < r.To, "request %v inside overflowed gap %v", r, o)
				}
			}
			require.LessOrEqual(t, total, uint64(maxPending))
			requireInvariants(t, d)
		}
		require.GreaterOrEqual(t, len(overflowed), 300/7, "every absurd gap overflowed")
		st := d.Stats()
		require.Equal(t, uint64(len(overflowed)), st.Overflows)
		require.Less(t, st.Requested, uint64(300*900*10), "sanity")
	})
	t.Run("capacity boundary", func(t *testing.T) {
		d := NewLossDetector(Config{Generator: FixedDelay(ms), MaxPending: 100})
		d.OnGap(t0, rg(1, 61))
		require.Equal(t, uint64(60), d.Pending())
		d.OnGap(t0, rg(61, 102)) // 41 new: one too many
		require.Equal(t, uint64(60), d.Pending())
		d.OnGap(t0, rg(102, 142)) // 40 new: exactly full
		require.Equal(t, uint64(100), d.Pending())
		d.OnGap(t0, rg(150, 151))
		require.Equal(t, uint64(100), d.Pending())
		d.OnReceived(t0, rg(1, 11))
		d.OnGap(t0, rg(160, 170))
		require.Equal(t, uint64(100), d.Pending())
		require.Equal(t, uint64(2), d.Stats().Overflows)
		reqs, lost := d.Poll(t0, nil, nil)
		require.Empty(t, reqs)
		require.Equal(t, []Range{rg(61, 102), rg(150, 151)}, lost)
	})
}

func TestNextAfterFills(t *testing.T) {
	d := NewLossDetector(Config{Generator: FixedDelay(ms), Deadline: time.Second})
	d.OnGap(t0, rg(1, 2))
	d.OnGap(t0.Add(5*ms), rg(3, 4))
	at, _ := d.Next()
	require.Equal(t, t0.Add(ms), at)
	d.OnReceived(t0.Add(2*ms), rg(1, 2))
	requireInvariants(t, d)
	at, ok := d.Next()
	require.True(t, ok)
	require.Equal(t, t0.Add(6*ms), at, "Next is exact after the earliest range is filled")
	d.OnReceived(t0.Add(2*ms), rg(3, 4))
	_, ok = d.Next()
	require.False(t, ok)
}

// TestGiveUpBelow: what lies below the sequence is given up and counted
// lost, a range across it is cut and the part above keeps being asked for,
// and what lies above is untouched.
func TestGiveUpBelow(t *testing.T) {
	d := NewLossDetector(Config{Generator: FixedDelay(ms), MaxPending: 100})
	d.OnGap(t0, rg(1, 5))
	d.OnGap(t0, rg(5, 9))
	d.OnGap(t0.Add(ms), rg(20, 30))
	d.OnGap(t0, rg(40, 50))
	lost := d.GiveUpBelow(25, []Range{rg(0, 1)})
	require.Equal(t, []Range{rg(0, 1), rg(1, 9), rg(20, 25)}, lost)
	require.Equal(t, []Range{rg(25, 30), rg(40, 50)}, d.AppendMissing(nil))
	require.EqualValues(t, 15, d.Pending())
	st := d.Stats()
	require.EqualValues(t, 2, st.LostRanges)
	require.EqualValues(t, 8+5, st.LostMessages)
	requireInvariants(t, d)
	// The rest is asked for when due: the cut range keeps its timer.
	reqs, _ := d.Poll(t0.Add(2*ms), nil, nil)
	require.Equal(t, []Range{rg(25, 30), rg(40, 50)}, reqs)

	require.Empty(t, d.GiveUpBelow(25, nil), "nothing below")
	require.Equal(t, []Range{rg(25, 30), rg(40, 50)}, d.GiveUpBelow(wire.Seq(1000), nil))
	require.Zero(t, d.Pending())
	_, ok := d.Next()
	require.False(t, ok)
	requireInvariants(t, d)
}

func TestGiveUpAndReset(t *testing.T) {
	d := NewLossDetector(Config{Generator: FixedDelay(ms), MaxPending: 100})
	d.OnGap(t0, rg(1, 5))
	d.OnGap(t0, rg(5, 9))
	d.OnGap(t0, rg(20, 30))
	d.OnGap(t0, rg(40, 1000)) // overflow
	lost := d.GiveUp([]Range{rg(0, 1)})
	require.Equal(t, []Range{rg(0, 1), rg(1, 9), rg(20, 30), rg(40, 1000)}, lost)
	require.Zero(t, d.Pending())
	_, ok := d.Next()
	require.False(t, ok)
	st := d.Stats()
	require.Equal(t, uint64(3), st.LostRanges)
	require.Equal(t, uint64(8+10+960), st.LostMessages)
	requireInvariants(t, d)

	d.OnGap(t0, rg(1, 5))
	d.Reset()
	require.Equal(t, Stats{}, d.Stats())
	require.Zero(t, d.Pending())
	_, ok = d.Next()
	require.False(t, ok)
	reqs, lost := d.Poll(t0.Add(time.Hour), nil, nil)
	require.Empty(t, reqs)
	require.Empty(t, lost)
	// Usable after Reset.
	d.OnGap(t0, rg(7, 8))
	reqs, _ = d.Poll(t0.Add(ms), nil, nil)
	require.Equal(t, []Range{rg(7, 8)}, reqs)
}

func TestEmptyInputsIgnored(t *testing.T) {
	d := NewLossDetector(Config{})
	d.OnGap(t0, rg(5, 5))
	d.OnGap(t0, rg(9, 2))
	filled, age := d.OnReceived(t0, rg(3, 1))
	require.Zero(t, filled)
	require.Zero(t, age)
	_, ok := d.Next()
	require.False(t, ok)
	require.Equal(t, Stats{}, d.Stats())
}

// A clock that steps back (a caller bug) never yields a negative age.
func TestAgeNeverNegative(t *testing.T) {
	d := NewLossDetector(Config{})
	d.OnGap(t0, rg(1, 10))
	_, age := d.OnReceived(t0-monotime.Time(ms), rg(2, 3))
	require.Zero(t, age)
	_, age = d.OnReceived(t0-monotime.Time(ms), rg(1, 10))
	require.Zero(t, age)
}

// steadyState drives d through one cycle of a lossy stream: a new gap, a
// fill of an older one, a Poll. seq advances by 10 per call.
type steadyState struct {
	d          *LossDetector
	now        monotime.Time
	seq        wire.Seq
	reqs, lost []Range
}

func (s *steadyState) step() {
	s.now = s.now.Add(100 * time.Microsecond)
	s.d.OnGap(s.now, rg(s.seq, s.seq+2))
	s.d.OnReceived(s.now, rg(s.seq-200, s.seq-199)) // partial fill: splits
	s.d.OnReceived(s.now, rg(s.seq-400, s.seq-390)) // the rest
	s.seq += 10
	s.reqs, s.lost = s.d.Poll(s.now, s.reqs[:0], s.lost[:0])
}

func TestSteadyStateAllocs(t *testing.T) {
	s := &steadyState{d: NewLossDetector(Config{Seed: 1, Delay: ms}), now: t0, seq: 1000,
		reqs: make([]Range, 0, 64), lost: make([]Range, 0, 64)}
	for range 2000 {
		s.step()
	}
	requireInvariants(t, s.d)
	require.NotZero(t, s.d.Stats().NAKs)
	require.NotZero(t, s.d.Stats().Filled)
	allocs := testing.AllocsPerRun(1000, s.step)
	require.Zero(t, allocs)

	var reqs, lost []Range
	reqs, lost = make([]Range, 0, 8), make([]Range, 0, 8)
	idle := testing.AllocsPerRun(1000, func() {
		_, _ = s.d.Next()
		reqs, lost = s.d.Poll(s.now, reqs[:0], lost[:0])
		_ = s.d.Pending()
	})
	require.Zero(t, idle)
}

// Found by the fuzzer (test-model bugs, kept as regressions of the
// documented behaviour).
func TestOverflowEdges(t *testing.T) {
	const huge = wire.Seq(1) << 40
	t.Run("small extension of a doomed gap is tracked", func(t *testing.T) {
		// The rule judges the new part of each gap: a later heartbeat only
		// a few messages beyond an absurd one adds a small, plausible gap.
		d := NewLossDetector(Config{Generator: FixedDelay(ms), MaxPending: 10})
		d.OnGap(t0, rg(5, huge))
		d.OnGap(t0, rg(5, huge+4))
		require.Equal(t, uint64(4), d.Pending())
		reqs, lost := d.Poll(t0.Add(ms), nil, nil)
		require.Equal(t, []Range{rg(huge, huge+4)}, reqs)
		require.Equal(t, []Range{rg(5, huge)}, lost)
	})
	t.Run("adjacent doomed and expired ranges are joined in lost", func(t *testing.T) {
		d := NewLossDetector(Config{Generator: FixedDelay(ms), Deadline: 5 * ms, MaxPending: 10})
		d.OnGap(t0, rg(1, 9))
		d.OnGap(t0.Add(5*ms), rg(9, 100)) // overflow, due at once
		reqs, lost := d.Poll(t0.Add(5*ms), nil, nil)
		require.Empty(t, reqs)
		require.Equal(t, []Range{rg(1, 100)}, lost)
		require.Equal(t, uint64(1), d.Stats().LostRanges)
	})
}

// TestPartialAnswerAsksForTheRest: a server answers a request with one
// packet; the rest of the range is asked for Continue after the last
// repair, not a retry interval later, and its deadline is unchanged.
func TestPartialAnswerAsksForTheRest(t *testing.T) {
	cfg := fixedConfig(0, 10*ms, 100*ms, time.Second)
	d := NewLossDetector(cfg)
	d.OnGap(t0, rg(1, 1001))
	reqs, _ := d.Poll(t0, nil, nil)
	require.Equal(t, []Range{rg(1, 1001)}, reqs)
	now := t0
	for from := wire.Seq(1); from < 1001; from += 70 {
		now = now.Add(200 * time.Microsecond) // the answer's round trip
		to := min(from+70, 1001)
		n, _ := d.OnReceived(now, rg(from, to))
		require.EqualValues(t, to-from, n)
		if to == 1001 {
			break
		}
		next, ok := d.Next()
		require.True(t, ok)
		require.Equal(t, now.Add(DefaultContinue), next, "the rest is due Continue after the partial answer")
		require.NoError(t, d.checkInvariants())
		reqs, lost := d.Poll(next, nil, nil)
		require.Empty(t, lost)
		require.Equal(t, []Range{rg(to, 1001)}, reqs)
		now = next
	}
	require.Zero(t, d.Pending())
	require.Less(t, now.Sub(t0), 100*ms, "15 partial answers take about 15 round trips, not 15 retries")
}

// TestPartialAnswerAsksForTheAdjacentRest: consecutive lost packets are
// separate gaps, adjacent, and one request joins them; a server's
// one-packet answer that ends where one of them ends leaves the next
// ones asked for, and they are the rest of that request: asked for
// again together (up to MaxRequest messages) Continue after the answer,
// not a retry interval later. Before, only a range whose front the
// answer filled was hurried, so a subscriber recovering a backlog of
// thousands of small adjacent gaps (a restarted run that waited for its
// predecessor to go quiet) asked one packet's worth per retry interval and
// declared most of it lost at its deadline.
func TestPartialAnswerAsksForTheAdjacentRest(t *testing.T) {
	cfg := fixedConfig(0, 10*ms, 100*ms, time.Second)
	cfg.MaxRequest = 6
	d := NewLossDetector(cfg)
	for from := wire.Seq(1); from < 11; from += 2 {
		d.OnGap(t0, rg(from, from+2)) // one lost packet of two messages each
	}
	reqs, _ := d.Poll(t0, nil, nil)
	require.Equal(t, []Range{rg(1, 7), rg(7, 11)}, reqs, "adjacent gaps joined, split at MaxRequest")
	now := t0.Add(200 * time.Microsecond)
	n, _ := d.OnReceived(now, rg(1, 3)) // the first packet of the answer, ending where a gap ends
	require.EqualValues(t, 2, n)
	next, ok := d.Next()
	require.True(t, ok)
	require.Equal(t, now.Add(DefaultContinue), next, "the rest is due Continue after the partial answer")
	reqs, lost := d.Poll(next, nil, nil)
	require.Empty(t, lost)
	require.Equal(t, []Range{rg(3, 7)}, reqs, "the rest of the request the answer began, joined again")
	require.NoError(t, d.checkInvariants())
	// [7, 11), a request of its own still in flight, was not hurried: its
	// retry is due 10 ms after the first NAK.
	reqs, _ = d.Poll(t0.Add(10*ms-1), nil, nil)
	require.Empty(t, reqs)
	reqs, _ = d.Poll(t0.Add(10*ms), nil, nil)
	require.Equal(t, []Range{rg(7, 11)}, reqs)

	// A fill strictly inside one range is not an answer (an answer starts
	// where its request starts): the pieces keep their schedule.
	d = NewLossDetector(cfg)
	d.OnGap(t0, rg(1, 5))
	d.OnGap(t0, rg(5, 7))
	reqs, _ = d.Poll(t0, nil, nil)
	require.Equal(t, []Range{rg(1, 7)}, reqs)
	d.OnReceived(t0.Add(ms), rg(2, 3))
	next, _ = d.Next()
	require.Equal(t, t0.Add(10*ms), next)
}
