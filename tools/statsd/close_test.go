package statsd

import (
	"net/netip"
	"testing"
	"time"

	"github.com/mdbus/mdbus/internal/netlab"
	"github.com/mdbus/mdbus/publisher"
	"github.com/mdbus/mdbus/subscriber"
	"github.com/stretchr/testify/require"
)

// A second Close of a Relay, a Client or a Collector returns ErrClosed,
// as in the bus's own packages (README "House conventions").
func TestCloseTwice(t *testing.T) {
	netlab.Require(t)
	loop := netip.MustParseAddrPort("127.0.0.1:0")
	r, err := NewRelay(RelayConfig{Listen: loop, Retransmit: loop, EndGrace: time.Millisecond,
		Bus: publisher.Config{Group: newGroup()}})
	require.NoError(t, err)
	require.NoError(t, r.Close())
	require.ErrorIs(t, r.Close(), ErrClosed, "Relay")

	group := newGroup()
	cl, err := NewClient(ClientConfig{Bus: publisher.Config{Group: group, Grace: time.Millisecond},
		Retransmit: loop, TickInterval: 10 * time.Millisecond})
	require.NoError(t, err)
	col, err := NewCollector(CollectorConfig{Bus: subscriber.Config{Group: group, Recovery: subscriber.Recovery{Retransmitter: cl.RetransmitAddr()}},
		FlushInterval: oneInterval, Backends: []Backend{newRecorder()}})
	require.NoError(t, err)
	require.NoError(t, cl.Close())
	require.ErrorIs(t, cl.Close(), ErrClosed, "Client")
	require.NoError(t, col.Close())
	require.ErrorIs(t, col.Close(), ErrClosed, "Collector")
}
