package sock_test

import (
	"net/netip"
	"testing"
	"time"

	"github.com/mdbus/mdbus/internal/sock"
	"github.com/stretchr/testify/require"
)

// TestConfigRule: a negative value is refused with the field's name
// before any socket is opened; the zero value opens with the kernel's
// defaults.
func TestConfigRule(t *testing.T) {
	local := netip.MustParseAddrPort("127.0.0.1:0")
	for _, tc := range []struct {
		field string
		cfg   sock.Config
	}{
		{"TTL", sock.Config{TTL: -1}},
		{"ReadBuffer", sock.Config{ReadBuffer: -1}},
		{"WriteBuffer", sock.Config{WriteBuffer: -1}},
		{"BusyPoll", sock.Config{BusyPoll: -time.Microsecond}},
	} {
		t.Run(tc.field, func(t *testing.T) {
			tc.cfg.Local = local
			_, err := sock.Open(tc.cfg)
			require.ErrorIs(t, err, sock.ErrConfig)
			require.ErrorContains(t, err, tc.field+" -")
		})
	}
	c, err := sock.Open(sock.Config{Local: local})
	require.NoError(t, err, "zero: the kernel's defaults")
	require.Positive(t, c.ReadBufferGranted)
	require.NoError(t, c.Close())
}
