package nak

import (
	"container/heap"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mdbus/mdbus/internal/monotime"
	"github.com/mdbus/mdbus/wire"
)

// lossPattern describes a seeded random stream for the property tests.
type lossPattern struct {
	name      string
	msgs      int           // messages in the stream
	step      time.Duration // between consecutive messages
	maxPacket int           // messages per packet, 1..maxPacket
	lossP     float64       // a packet is lost
	burstP    float64       // a loss starts a burst of up to burstMax packets
	burstMax  int
	lateP     float64       // a lost packet turns up late anyway (reordering, A/B)
	lateMax   time.Duration // ... within this
	repairP   float64       // a repair packet arrives
	repairLat time.Duration // request to repair, plus up to as much jitter
	cfg       Config
}

// arrival is a packet reaching the subscriber.
type arrival struct {
	at  monotime.Time
	ord int // FIFO among equal times
	r   Range
}

type arrivals []arrival

func (h arrivals) Len() int { return len(h) }
func (h arrivals) Less(i, j int) bool {
	if h[i].at != h[j].at {
		return h[i].at < h[j].at
	}
	return h[i].ord < h[j].ord
}
func (h arrivals) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *arrivals) Push(x any)   { *h = append(*h, x.(arrival)) }
func (h *arrivals) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// msgState is the test's model of one sequence.
type msgState struct {
	gapSeen     monotime.Time
	reported    bool // in a gap
	overflow    bool // its gap was declared lost at once
	received    bool
	lost        bool
	reqs        int
	lastReq     monotime.Time
	suppress    bool // filled before any request
	filledGap   bool // filled while tracked
	hurried     bool // the range before it was partly answered since its last request
	everHurried bool
}

// simulate runs pattern p with seed and checks the properties on every
// call. It returns the detector's final stats.
func simulate(t *testing.T, p lossPattern, seed uint64) Stats {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, seed*7+1))
	cfg := p.cfg
	cfg.Seed = seed + 1
	if cfg.Window == 0 {
		// The window postpones first NAKs past Delay; TestWindow checks it.
		cfg.Window = 1 << 30
	}
	d := NewLossDetector(cfg)
	c := d.Config()

	n := p.msgs
	st := make([]msgState, n+2) // index = sequence; 1..n used
	h := &arrivals{}
	ord := 0
	push := func(at monotime.Time, r Range) {
		ord++
		heap.Push(h, arrival{at, ord, r})
	}

	// Originals: packets in order, some lost, some of those late.
	burst := 0
	for seq := 1; seq <= n; {
		size := min(1+rng.IntN(p.maxPacket), n+1-seq)
		r := rg(wire.Seq(seq), wire.Seq(seq+size))
		sent := t0.Add(time.Duration(seq) * p.step)
		lostPkt := burst > 0 || rng.Float64() < p.lossP
		if burst > 0 {
			burst--
		} else if lostPkt && rng.Float64() < p.burstP {
			burst = rng.IntN(p.burstMax + 1)
		}
		switch {
		case !lostPkt:
			push(sent, r)
		case rng.Float64() < p.lateP:
			push(sent.Add(time.Duration(rng.Int64N(int64(p.lateMax)+1))), r)
		}
		seq += size
	}
	endAt := t0.Add(time.Duration(n+1) * p.step) // the heartbeat saying next = n+1
	heartbeatDone := false

	horizon := wire.Seq(1)
	modelPending := uint64(0)
	var reqs, lost []Range

	gap := func(now monotime.Time, r Range) {
		before := d.Pending()
		d.OnGap(now, r)
		overflow := d.Pending() == before
		if !overflow {
			require.Equal(t, before+r.Len(), d.Pending())
			modelPending += r.Len()
		}
		for s := r.From; s < r.To; s++ {
			m := &st[s]
			if m.reported || m.received {
				t.Fatalf("seq %d reported twice", s)
			}
			m.reported, m.gapSeen, m.overflow = true, now, overflow
		}
	}
	receive := func(now monotime.Time, r Range) {
		if r.To > horizon {
			require.GreaterOrEqual(t, r.From, horizon, "packet straddles the horizon")
			if r.From > horizon {
				gap(now, rg(horizon, r.From))
			}
			horizon = r.To
		}
		var want uint64
		oldest := now
		for s := r.From; s < r.To; s++ {
			m := &st[s]
			if m.reported && !m.received && !m.lost {
				want++
				oldest = min(oldest, m.gapSeen)
				m.filledGap = true
				m.suppress = m.reqs == 0
				if !m.overflow {
					modelPending--
				}
			}
			m.received = true
		}
		// A fill of the front of a range already asked for hurries the
		// rest (Config.Continue): mark the missing run after r, which
		// may span more than that range's entry.
		for q := r.To; q < wire.Seq(len(st)) && q < horizon; q++ {
			m := &st[q]
			if !m.reported || m.received || m.lost {
				break
			}
			m.hurried, m.everHurried = true, true
		}
		filled, age := d.OnReceived(now, r)
		if filled != want || (want > 0 && age != now.Sub(oldest)) || (want == 0 && age != 0) {
			t.Fatalf("fill %v at %v: filled %d age %v, want %d, %v", r, now.Sub(t0), filled, age, want, now.Sub(oldest))
		}
	}
	poll := func(now monotime.Time) {
		reqs, lost = d.Poll(now, reqs[:0], lost[:0])
		// Plain ifs in the per-message loops: require's variadic arguments
		// would dominate the run time.
		for _, r := range reqs {
			if r.From >= r.To || r.Len() > uint64(c.MaxRequest) {
				t.Fatalf("request %v empty or over MaxRequest %d", r, c.MaxRequest)
			}
			for s := r.From; s < r.To; s++ {
				m := &st[s]
				switch {
				case !m.reported:
					t.Fatalf("seq %d requested but never missing", s)
				case m.received:
					t.Fatalf("seq %d requested after it arrived", s)
				case m.lost:
					t.Fatalf("seq %d requested after it was lost", s)
				case m.overflow:
					t.Fatalf("seq %d requested from an overflowed gap", s)
				}
				m.reqs++
				if m.reqs == 1 {
					// First NAK in [gapSeen, gapSeen+Delay).
					if now < m.gapSeen || now.Sub(m.gapSeen) >= c.Delay {
						t.Fatalf("seq %d first NAK %v after its gap, Delay %v", s, now.Sub(m.gapSeen), c.Delay)
					}
				} else {
					// Never again inside the backoff interval; polled on time,
					// exactly at its end.
					backoff := min(c.Retry<<(m.reqs-2), c.MaxRetry)
					// A partial answer hurries the rest and restarts its
					// backoff: never later than the schedule, then.
					if got := now.Sub(m.lastReq); got != backoff && !(m.everHurried && got <= backoff) {
						t.Fatalf("seq %d request %d came %v after the previous, want %v", s, m.reqs, got, backoff)
					}
				}
				m.lastReq = now
				m.hurried = false
			}
		}
		for _, r := range lost {
			for s := r.From; s < r.To; s++ {
				m := &st[s]
				switch {
				case !m.reported:
					t.Fatalf("seq %d lost but never missing", s)
				case m.received:
					t.Fatalf("seq %d lost after it arrived", s)
				case m.lost:
					t.Fatalf("seq %d lost twice", s)
				}
				m.lost = true
				if m.overflow {
					if now != m.gapSeen {
						t.Fatalf("seq %d overflowed but lost %v after its gap", s, now.Sub(m.gapSeen))
					}
				} else {
					if now.Sub(m.gapSeen) != c.Deadline {
						t.Fatalf("seq %d lost %v after its gap, Deadline %v", s, now.Sub(m.gapSeen), c.Deadline)
					}
					modelPending--
				}
			}
		}
		// Repairs for what was asked.
		for _, r := range reqs {
			for from := r.From; from < r.To; {
				to := min(r.To, from+wire.Seq(1+rng.IntN(p.maxPacket)))
				if rng.Float64() < p.repairP {
					jitter := time.Duration(rng.Int64N(int64(p.repairLat) + 1))
					push(now.Add(p.repairLat+jitter), rg(from, to))
				}
				from = to
			}
		}
		if d.Pending() > c.MaxPending || d.Pending() != modelPending {
			t.Fatalf("Pending %d, model %d, MaxPending %d", d.Pending(), modelPending, c.MaxPending)
		}
		if err := d.checkInvariants(); err != nil {
			t.Fatal(err)
		}
	}

	const maxSteps = 10_000_000
	done := false
	for steps := 0; !done; steps++ {
		require.Less(t, steps, maxSteps, "simulation did not finish")
		// The next thing to happen: an arrival, the tail heartbeat, or a timer.
		now := monotime.Time(1<<63 - 1)
		kind := ""
		if h.Len() > 0 {
			now, kind = (*h)[0].at, "arrival"
		}
		if !heartbeatDone && endAt < now {
			now, kind = endAt, "heartbeat"
		}
		if at, ok := d.Next(); ok && at < now {
			now, kind = at, "timer"
		}
		switch kind {
		case "":
			done = true
			continue
		case "arrival":
			a := heap.Pop(h).(arrival)
			receive(now, a.r)
		case "heartbeat":
			heartbeatDone = true
			if horizon <= wire.Seq(n) {
				gap(now, rg(horizon, wire.Seq(n+1)))
				horizon = wire.Seq(n + 1)
			}
		}
		poll(now)
	}

	// Eventually every message arrived or was declared lost, and every gap
	// was asked for, filled before its first NAK, or declared lost.
	var suppressed, filled, lostN uint64
	for s := 1; s <= n; s++ {
		m := &st[s]
		require.True(t, m.received || m.lost, "seq %d neither arrived nor lost", s)
		if m.reported {
			require.True(t, m.reqs > 0 || m.suppress || m.lost, "seq %d never asked for", s)
			if m.lost && !m.overflow && c.Deadline > c.Delay {
				require.Positive(t, m.reqs, "seq %d given up without a NAK", s)
			}
		}
		if m.filledGap {
			filled++
			if m.suppress {
				suppressed++
			}
		}
		if m.lost {
			lostN++
		}
	}
	got := d.Stats()
	require.Equal(t, filled, got.Filled)
	require.Equal(t, suppressed, got.Suppressed)
	require.Equal(t, lostN, got.LostMessages)
	require.Equal(t, got.GapMessages, got.Filled+got.LostMessages)
	require.Zero(t, d.Pending())
	return got
}

func TestPropertyRandomLoss(t *testing.T) {
	lan := Config{MaxRequest: 64}
	patterns := []lossPattern{
		{
			name: "5% single-packet loss, good repairs", msgs: 50_000, step: time.Microsecond,
			maxPacket: 1, lossP: 0.05, repairP: 0.9, repairLat: 200 * time.Microsecond, cfg: lan,
		},
		{
			name: "packets of 1-8, bursts, lossy slow repairs", msgs: 50_000, step: time.Microsecond,
			maxPacket: 8, lossP: 0.02, burstP: 0.2, burstMax: 40, repairP: 0.5, repairLat: 3 * ms,
			cfg: Config{Deadline: 80 * ms, MaxRequest: 10},
		},
		{
			name: "retransmitter dead: all given up", msgs: 20_000, step: time.Microsecond,
			maxPacket: 4, lossP: 0.03, repairP: 0, repairLat: ms,
			cfg: Config{Retry: 2 * ms, MaxRetry: 9 * ms, Deadline: 50 * ms},
		},
		{
			name: "heavy reordering suppresses NAKs", msgs: 50_000, step: time.Microsecond,
			maxPacket: 2, lossP: 0.05, lateP: 0.8, lateMax: 3 * ms, repairP: 0.9,
			repairLat: 100 * time.Microsecond, cfg: lan,
		},
		{
			name: "small MaxPending overflows", msgs: 50_000, step: time.Microsecond,
			maxPacket: 8, lossP: 0.01, burstP: 0.5, burstMax: 60, repairP: 0.7, repairLat: ms,
			cfg: Config{MaxPending: 200, Deadline: 40 * ms, MaxRequest: 16},
		},
		{
			name: "slow stream, fixed zero delay (unicast)", msgs: 5_000, step: 100 * time.Microsecond,
			maxPacket: 3, lossP: 0.1, repairP: 0.6, repairLat: 500 * time.Microsecond,
			cfg: Config{Generator: FixedDelay(0), Retry: ms, MaxRetry: 4 * ms, Deadline: 30 * ms, MaxRequest: 2},
		},
	}
	for _, p := range patterns {
		t.Run(p.name, func(t *testing.T) {
			var agg Stats
			for seed := uint64(1); seed <= 3; seed++ {
				t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
					s := simulate(t, p, seed)
					agg = addStats(agg, s)
				})
			}
			// The patterns exercise what their names say.
			require.NotZero(t, agg.Gaps)
			switch p.name {
			case "retransmitter dead: all given up":
				require.Zero(t, agg.Filled-agg.Suppressed)
				require.NotZero(t, agg.LostMessages)
				require.NotZero(t, agg.Retries)
			case "heavy reordering suppresses NAKs":
				require.NotZero(t, agg.Suppressed)
			case "small MaxPending overflows":
				require.NotZero(t, agg.Overflows)
			case "packets of 1-8, bursts, lossy slow repairs":
				require.NotZero(t, agg.Retries)
				require.NotZero(t, agg.LostMessages)
			}
			t.Logf("%+v", agg)
		})
	}
}

func addStats(a, b Stats) Stats {
	return Stats{
		Gaps: a.Gaps + b.Gaps, GapMessages: a.GapMessages + b.GapMessages,
		NAKs: a.NAKs + b.NAKs, Retries: a.Retries + b.Retries,
		Requests: a.Requests + b.Requests, Requested: a.Requested + b.Requested,
		Filled: a.Filled + b.Filled, Suppressed: a.Suppressed + b.Suppressed,
		LostRanges: a.LostRanges + b.LostRanges, LostMessages: a.LostMessages + b.LostMessages,
		Overflows: a.Overflows + b.Overflows, OverflowMessages: a.OverflowMessages + b.OverflowMessages,
	}
}
