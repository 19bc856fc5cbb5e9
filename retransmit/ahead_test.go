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
