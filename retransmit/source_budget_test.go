package retransmit

import (
	"net/netip"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mdbus/mdbus/internal/monotime"
	"github.com/mdbus/mdbus/wire"
)

// countingSource counts the bytes of the packets its Source built, to
// compare with what the handler sent.
type countingSource struct {
	Source
	calls, built int
}

func (c *countingSource) AppendPacket(dst []byte, s wire.Session, from wire.Seq, max, payloadSize int) ([]byte, int, error) {
	start := len(dst)
	pkt, n, err := c.Source.AppendPacket(dst, s, from, max, payloadSize)
	c.calls++
	if n > 0 {
		c.built += len(pkt) - start
	}
	return pkt, n, err
}

// TestHandlerBuildsOnlyWhatItSends: a source (a journal reading disk) is
// never asked for a packet that MaxRequestBytes then drops.
func TestHandlerBuildsOnlyWhatItSends(t *testing.T) {
	from := netip.MustParseAddrPort("127.0.0.1:9")
	for _, c := range []struct {
		name     string
		maxBytes int
		packets  int
	}{{"default-one-packet", 0, 1}, {"one-and-a-half", wire.DefaultPayloadSizeIPv4 * 3 / 2, 2}} {
		t.Run(c.name, func(t *testing.T) {
			cache, s := cachedSession(t, "BUDGET", 1, 1001, 40, CacheConfig{})
			src := &countingSource{Source: cache}
			h, uni, _, st := testHandler(t, ServerConfig{Sources: []Source{src}, MaxRequestBytes: c.maxBytes})
			h.handle(monotime.Now(), request(s, 1, 1000), false, from)
			h.flush()
			require.EqualValues(t, 1, st.snapshot().Answered)
			require.Len(t, uni.sent, c.packets)
			// At most one more call, which finds nothing fitting the rest
			// of the budget and builds nothing.
			require.LessOrEqual(t, src.calls, c.packets+1)
			require.EqualValues(t, uni.bytes, src.built, "built only what it sent")
		})
	}
}
