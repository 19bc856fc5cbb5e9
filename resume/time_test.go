package resume

import (
	"net/netip"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mdbus/mdbus/internal/netlab"
	"github.com/mdbus/mdbus/journal"
	"github.com/mdbus/mdbus/publisher"
	"github.com/mdbus/mdbus/subscriber"
	"github.com/stretchr/testify/require"
)

type lazySink struct {
	w atomic.Pointer[journal.Writer]
}

func (s *lazySink) SentPacket(p []byte) {
	if w := s.w.Load(); w != nil {
		w.SentPacket(p)
	}
}

// TestConsumerFromTime: a consumer asked to start at a time finds the
// sequence through the journal's time index, reads the history from the
// journal and switches to live.
func TestConsumerFromTime(t *testing.T) {
	netlab.Require(t)
	group := netip.MustParseAddrPort("239.192.40.2:32402")
	j, err := journal.Open(filepath.Join(t.TempDir(), "j"), journal.Config{})
	require.NoError(t, err)
	defer j.Close()
	sink := &lazySink{}
	pub, err := publisher.New(publisher.Config{Group: group, Session: "TIMED", Sinks: []publisher.Sink{sink}})
	require.NoError(t, err)
	defer pub.Close()
	w, err := j.Create(pub.Session(), pub.LocalAddr(), 1)
	require.NoError(t, err)
	sink.w.Store(w)
	var at time.Time
	for i := uint64(1); i <= 1000; i++ {
		if i == 500 {
			// The journal stamps a packet with the wall clock when the
			// publisher hands it over, before Flush returns: 499 is stamped
			// at or before last, at is after it, and 500 at or after at.
			require.NoError(t, pub.Flush(t.Context()))
			last := time.Now().UnixNano()
			for at = time.Now(); at.UnixNano() <= last; at = time.Now() {
			}
		}
		_, err := pub.Publish(msg(i))
		require.NoError(t, err)
	}
	require.NoError(t, pub.Flush(t.Context()))
	col := &collector{next: 500}
	c, err := New(Config{Feed: subscriber.Config{Group: group}, Journal: j,
		Start: Start{Kind: StartTime, Time: at.UnixNano()}, OnMessage: col.on})
	require.NoError(t, err)
	defer c.Close()
	_, err = pub.Publish(msg(1001)) // New returned: the feed is joined
	require.NoError(t, err)
	col.wait(t, 1001)
	st := c.Stats()
	require.Equal(t, uint64(501), st.History)
	require.Equal(t, uint64(1), st.Live)
	require.NoError(t, c.Close())
	require.NoError(t, w.Close())
}
