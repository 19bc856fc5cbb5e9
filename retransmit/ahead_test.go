package retransmit

import (
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mdbus/mdbus/internal/monotime"
	"github.com/mdbus/mdbus/wire"
)

// TestHeldAheadAnsweredWhenCached: a request for messages the cache does
// not hold yet but expects next (a subscriber saw the gap before the
// rewinder cached the packets after it), or of a session it has not seen,
// is held and confirmed "later", then answered once they are cached; it
// is refused only when they never come within a second.
func TestHeldAheadAnsweredWhenCached(t *testing.T) {
	s := mustSession(t, "AHEAD")
	c := NewCache(CacheConfig{})
	fill(c, s, 1, 101, 50) // holds [1, 101)
	h, uni, _, st := testHandler(t, ServerConfig{Sources: []Source{c}, CoalesceWindow: -1})
	from := netip.MustParseAddrPort("127.0.0.1:4000")
	now := monotime.Now()
	h.handle(now, request(s, 101, 3), false, from)                     // next expected: held
	h.handle(now, request(mustSession(t, "LATER"), 1, 2), false, from) // unknown yet: held
	h.flush()
	snap := st.snapshot()
	require.EqualValues(t, 2, snap.Deferred)
	require.Zero(t, snap.Refused.Total())
	require.Len(t, uni.sent, 2, "two 'later' confirms")
	for _, p := range uni.sent {
		cf, err := wire.ParseConfirm(p.pkt)
		require.NoError(t, err)
		require.Equal(t, wire.ConfirmLater, cf.Kind)
	}
	uni.sent = uni.sent[:0]
	// The messages arrive; the next look answers the first.
	fill(c, s, 101, 110, 50)
	now = now.Add(time.Millisecond)
	require.NotZero(t, h.serveLater(now))
	h.flush()
	snap = st.snapshot()
	require.EqualValues(t, 1, snap.DeferredAnswered)
	got := 0
	for _, p := range uni.sent {
		pkt, err := wire.ParsePacket(p.pkt)
		require.NoError(t, err)
		got += int(pkt.Count)
	}
	require.Equal(t, 3, got)
	// The unknown session never comes: refused after a second.
	require.Zero(t, h.serveLater(now.Add(aheadHold)))
	require.EqualValues(t, 1, st.snapshot().Refused.UnknownSession)
}

// TestAheadTableFullToldLater: a request for messages not received yet
// that finds its host's share of the held table full is not refused but
// confirmed "later" without being held (ToldLater), so that its requester
// asks again after its retry interval; one far past what the sources
// expect (aheadSpan) is still refused, and so is one of a session they do
// not know.
func TestAheadTableFullToldLater(t *testing.T) {
	s := mustSession(t, "FULL")
	c := NewCache(CacheConfig{})
	fill(c, s, 1, 101, 50) // holds [1, 101), expects 101
	// MaxDeferred 4: one host holds at most 4/laterShare = 1.
	h, uni, _, st := testHandler(t, ServerConfig{Sources: []Source{c}, CoalesceWindow: -1, MaxDeferred: 4})
	from := netip.MustParseAddrPort("127.0.0.1:4000")
	now := monotime.Now()
	h.handle(now, request(s, 101, 3), false, from) // held
	h.handle(now, request(s, 104, 3), false, from) // the host's share is full: told later
	h.handle(now, request(s, 101+aheadSpan, 1), false, from)
	h.handle(now, request(mustSession(t, "NEVER"), 1, 1), false, from)
	h.flush()
	snap := st.snapshot()
	require.EqualValues(t, 1, snap.Deferred)
	require.EqualValues(t, 1, snap.ToldLater)
	require.EqualValues(t, 1, snap.Refused.OutOfRange, "far past what the sources expect")
	require.EqualValues(t, 1, snap.Refused.UnknownSession)
	require.Len(t, uni.sent, 2, "a confirm each for the held and the told")
	for i, want := range []wire.Seq{101, 104} {
		cf, err := wire.ParseConfirm(uni.sent[i].pkt)
		require.NoError(t, err)
		require.Equal(t, wire.ConfirmLater, cf.Kind)
		require.Equal(t, want, cf.Seq)
		require.EqualValues(t, 3, cf.Count)
		require.Equal(t, from, uni.sent[i].to)
	}
	// Nothing of the told request is kept: when the messages come, only
	// the held one is answered.
	uni.sent = uni.sent[:0]
	fill(c, s, 101, 110, 50)
	h.serveLater(now.Add(time.Millisecond))
	h.flush()
	got := 0
	for _, p := range uni.sent {
		pkt, err := wire.ParsePacket(p.pkt)
		require.NoError(t, err)
		require.Equal(t, wire.Seq(101), pkt.Seq)
		got += int(pkt.Count)
	}
	require.Equal(t, 3, got)
}
