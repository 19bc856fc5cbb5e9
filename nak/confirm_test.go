package nak

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mdbus/mdbus/internal/monotime"
)

func TestOnConfirmSuppressesFirstNAK(t *testing.T) {
	d := NewLossDetector(Config{Generator: FixedDelay(2 * ms)})
	d.OnGap(t0, rg(10, 20))
	// Another receiver's request for [12, 15) is confirmed before ours.
	_, ok := d.OnConfirm(t0.Add(ms), rg(12, 15), 0)
	require.False(t, ok, "we asked for none of it")
	requireInvariants(t, d)
	reqs, _ := d.Poll(t0.Add(2*ms), nil, nil)
	require.Equal(t, []Range{rg(10, 12), rg(15, 20)}, reqs, "the confirmed piece is not asked")
	require.EqualValues(t, 3, d.Stats().Confirmed)
	// Nothing came: the confirmed piece is asked after Retry from the confirm.
	reqs, _ = d.Poll(t0.Add(ms+DefaultRetry-1), nil, nil)
	require.Empty(t, reqs)
	reqs, _ = d.Poll(t0.Add(ms+DefaultRetry), nil, nil)
	require.Equal(t, []Range{rg(12, 15)}, reqs)
	requireInvariants(t, d)
}

func TestOnConfirmLaterAndRTT(t *testing.T) {
	d := NewLossDetector(Config{Generator: FixedDelay(0)})
	d.OnGap(t0, rg(1, 5))
	reqs, _ := d.Poll(t0, nil, nil)
	require.Equal(t, []Range{rg(1, 5)}, reqs)
	// Our request is confirmed "later": 30 ms.
	rtt, ok := d.OnConfirm(t0.Add(300*time.Microsecond), rg(1, 5), 30*ms)
	require.True(t, ok)
	require.Equal(t, 300*time.Microsecond, rtt)
	// No retry before after + Retry.
	at := t0.Add(300*time.Microsecond + 30*ms + DefaultRetry)
	next, _ := d.Next()
	require.Equal(t, at, next)
	reqs, _ = d.Poll(at-1, nil, nil)
	require.Empty(t, reqs)
	reqs, _ = d.Poll(at, nil, nil)
	require.Equal(t, []Range{rg(1, 5)}, reqs)
	requireInvariants(t, d)
}

func TestMaxRequestAndWindow(t *testing.T) {
	d := NewLossDetector(Config{Generator: FixedDelay(0), Window: 4})
	d.SetMaxRequest(10)
	require.Equal(t, 10, d.MaxRequest())
	d.OnGap(t0, rg(1, 101)) // 100 messages: ten requests of 10, four in flight at most
	reqs, _ := d.Poll(t0, nil, nil)
	require.Equal(t, []Range{rg(1, 11), rg(11, 21), rg(21, 31), rg(31, 41)}, reqs)
	requireInvariants(t, d)
	// The window is full: nothing more until answers make room.
	reqs, _ = d.Poll(t0.Add(DefaultContinue), nil, nil)
	require.Empty(t, reqs)
	// Two answers arrive: two more requests at the next look.
	d.OnReceived(t0.Add(DefaultContinue), rg(1, 21))
	now := t0.Add(2 * DefaultContinue)
	reqs, _ = d.Poll(now, nil, nil)
	require.Equal(t, []Range{rg(41, 51), rg(51, 61)}, reqs)
	requireInvariants(t, d)
	d.SetMaxRequest(0)
	require.Equal(t, 1, d.MaxRequest(), "clamped to 1")
	d.SetMaxRequest(1 << 20)
	require.Equal(t, DefaultMaxRequest, d.MaxRequest(), "clamped to MaxRequest")
}

func TestGroupBackoff(t *testing.T) {
	g := NewGroupBackoff(1)
	require.Zero(t, g.Window(), "a group of one does not wait")
	require.Zero(t, g.Delay())
	g.SetGroup(32)
	require.Equal(t, InitialRTT, g.RTT())
	g.ObserveRTT(3 * ms)
	require.Equal(t, 2*ms, g.RTT(), "rises halfway at once")
	for range 200 {
		g.ObserveRTT(500 * time.Microsecond)
	}
	require.InDelta(t, float64(500*time.Microsecond), float64(g.RTT()), float64(20*time.Microsecond), "falls slowly to the samples")
	w := g.Window()
	for range 10_000 {
		d := g.Delay()
		require.GreaterOrEqual(t, d, time.Duration(0))
		require.Less(t, d, w)
	}
	require.Zero(t, testing.AllocsPerRun(100, func() { g.Delay() }))
}

// TestGroupBackoffSuppression simulates the loss of one packet by G
// receivers that each hear the first NAK's confirm s after it left (s
// equal to the measured round trip, as on a LAN): the NAKs per loss stay
// near one at every group size.
func TestGroupBackoffSuppression(t *testing.T) {
	const rtt = 500 * time.Microsecond
	for _, group := range []int{2, 4, 16, 32, 64, 256} {
		var naks, first float64
		const trials = 2000
		rng := rand.New(rand.NewPCG(uint64(group), 7))
		gs := make([]*GroupBackoff, group)
		for i := range gs {
			gs[i] = NewGroupBackoff(rng.Uint64() | 1)
			gs[i].SetGroup(group)
			gs[i].rtt = rtt
		}
		ds := make([]time.Duration, group)
		for range trials {
			for i, g := range gs {
				ds[i] = g.Delay()
			}
			earliest := slices.Min(ds)
			for _, d := range ds {
				if d < earliest+rtt {
					naks++
				}
			}
			first += float64(earliest)
		}
		perLoss := naks / trials
		t.Logf("G=%3d: window %v, %.2f NAKs per loss, first NAK after %v on average",
			group, gs[0].Window(), perLoss, time.Duration(first/trials))
		require.LessOrEqual(t, perLoss, 1.5, "group %d", group)
	}
	_ = monotime.Time(0)
}

// TestGroupBackoffSharedLoss: the back-off follows whether the group's
// losses are shared. When each of G receivers loses packets of its own,
// about 1/G of the confirms heard name one's own losses, and a lone loser
// asks at once; when all lose the same packets, every confirm does, and
// the window is the group's.
func TestGroupBackoffSharedLoss(t *testing.T) {
	g := NewGroupBackoff(3)
	g.SetGroup(8)
	g.rtt = 500 * time.Microsecond
	require.Positive(t, g.Window(), "assumed shared until confirms say otherwise")
	for i := range 400 { // independent loss: one confirm in 8 is ours
		g.ObserveRepair(i%8 == 0)
	}
	require.Less(t, g.Shared(), 0.15)
	require.Zero(t, g.Window(), "own losses are asked at once")
	require.Zero(t, g.Delay())
	for range 400 { // shared loss: every confirm is ours
		g.ObserveRepair(true)
	}
	require.Greater(t, g.Shared(), 0.95)
	require.Positive(t, g.Window())
}

// TestRetryFloor: with a floor above Retry (twice a slow round trip), a
// range is asked again only after the floor, and the doubled intervals
// never drop below it.
func TestRetryFloor(t *testing.T) {
	d := NewLossDetector(Config{Generator: FixedDelay(0)})
	d.SetRetryFloor(70 * ms)
	d.OnGap(t0, rg(1, 2))
	reqs, _ := d.Poll(t0, nil, nil)
	require.Len(t, reqs, 1)
	reqs, _ = d.Poll(t0.Add(70*ms-1), nil, nil)
	require.Empty(t, reqs, "not before the floor")
	reqs, _ = d.Poll(t0.Add(70*ms), nil, nil)
	require.Len(t, reqs, 1)
	next, _ := d.Next()
	require.Equal(t, t0.Add(70*ms+DefaultMaxRetry), next, "doubled, capped at MaxRetry, never below the floor")
	requireInvariants(t, d)
	d.SetRetryFloor(0)
	require.Equal(t, DefaultRetry, d.retry())
}

// TestWindowWaitKeepsDeadline: a range that waits for room in the window
// is not given up while it waits; its deadline counts from its first NAK.
// Ranges asked at once keep the deadline from when they were seen.
func TestWindowWaitKeepsDeadline(t *testing.T) {
	d := NewLossDetector(Config{Generator: FixedDelay(0), Window: 2, Deadline: time.Second})
	d.SetMaxRequest(10)
	d.OnGap(t0, rg(1, 41)) // four requests' worth, two in flight at most
	reqs, _ := d.Poll(t0, nil, nil)
	require.Equal(t, []Range{rg(1, 11), rg(11, 21)}, reqs)
	// The first two are answered only after 900 ms: the rest waited.
	d.OnReceived(t0.Add(900*time.Millisecond), rg(1, 21))
	reqs, lost := d.Poll(t0.Add(900*time.Millisecond), nil, nil)
	require.Equal(t, []Range{rg(21, 31), rg(31, 41)}, reqs)
	require.Empty(t, lost)
	requireInvariants(t, d)
	// One second after the gap was seen, they are 100 ms into their own
	// deadline: still asked for, not lost.
	_, lost = d.Poll(t0.Add(1100*time.Millisecond), nil, nil)
	require.Empty(t, lost, "the window's wait does not count against the deadline")
	// A second after their first NAK, unanswered: lost.
	_, lost = d.Poll(t0.Add(1900*time.Millisecond), nil, nil)
	require.Equal(t, []Range{rg(21, 41)}, lost)
	require.Zero(t, d.Pending())
	requireInvariants(t, d)
}

// TestLastRTTAndWait: a range asked once and filled gives its round trip
// (NAK to repair) and its wait (reported to NAK); one asked twice gives
// neither (Karn's rule), nor does a fill of nothing asked.
func TestLastRTTAndWait(t *testing.T) {
	d := NewLossDetector(Config{Generator: FixedDelay(2 * ms)})
	d.OnGap(t0, rg(1, 5))
	reqs, _ := d.Poll(t0.Add(3*ms), nil, nil) // due at 2 ms, sent late at 3
	require.Equal(t, []Range{rg(1, 5)}, reqs)
	d.OnReceived(t0.Add(3*ms+400*time.Microsecond), rg(1, 5))
	rtt, ok := d.LastRTT()
	require.True(t, ok)
	require.Equal(t, 400*time.Microsecond, rtt)
	wait, ok := d.LastWait()
	require.True(t, ok)
	require.Equal(t, 3*ms, wait)

	d.OnGap(t0.Add(10*ms), rg(10, 12))
	reqs, _ = d.Poll(t0.Add(12*ms), nil, nil)
	require.Equal(t, []Range{rg(10, 12)}, reqs)
	reqs, _ = d.Poll(t0.Add(12*ms+DefaultRetry), nil, nil)
	require.Equal(t, []Range{rg(10, 12)}, reqs, "asked again")
	d.OnReceived(t0.Add(30*ms), rg(10, 12))
	_, ok = d.LastRTT()
	require.False(t, ok, "asked twice: ambiguous")
	_, ok = d.LastWait()
	require.False(t, ok)
	d.OnReceived(t0.Add(31*ms), rg(40, 41))
	_, ok = d.LastWait()
	require.False(t, ok, "nothing asked was filled")
}
