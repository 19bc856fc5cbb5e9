package impair

import (
	"net/netip"
	"testing"
	"time"

	"github.com/mdbus/mdbus/packetconn/impair"
	"github.com/stretchr/testify/require"
)

// TestConfigRule: a negative value is refused with the field's name, a
// zero value takes the default.
func TestConfigRule(t *testing.T) {
	in, out := netip.MustParseAddrPort("239.192.0.1:31001"), netip.MustParseAddrPort("239.192.0.2:31001")
	for _, tc := range []struct {
		field string
		cfg   RelayConfig
	}{
		{"TTL", RelayConfig{TTL: -1}},
		{"Batch", RelayConfig{Batch: -1}},
		{"ReadBuffer", RelayConfig{ReadBuffer: -1}},
		{"ProgressEvery", RelayConfig{ProgressEvery: -time.Second}},
		{"Loss", RelayConfig{Impair: impair.Config{Loss: -1}}},
	} {
		t.Run(tc.field, func(t *testing.T) {
			tc.cfg.In, tc.cfg.Out = in, out
			_, err := tc.cfg.withDefaults()
			require.ErrorIs(t, err, impair.ErrInvalidConfig)
			require.ErrorContains(t, err, tc.field+" -")
		})
	}
	c, err := RelayConfig{In: in, Out: out}.withDefaults()
	require.NoError(t, err)
	require.Equal(t, DefaultRelayInterface, c.Interface)
	require.Equal(t, DefaultRelayBatch, c.Batch)
	require.Equal(t, DefaultRelayReadBuffer, c.ReadBuffer)
	require.Equal(t, DefaultProgressEvery, c.ProgressEvery)
}
