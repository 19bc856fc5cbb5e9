package subscriber

import (
	"net/netip"
	"testing"

	"github.com/mdbus/mdbus/nak"
	"github.com/stretchr/testify/require"
)

// TestConfigRefusesNegativeNAK: the NAK settings follow Config's rule; a
// negative one is refused with its name, before any socket is opened.
func TestConfigRefusesNegativeNAK(t *testing.T) {
	_, err := New(Config{Group: netip.MustParseAddrPort("239.192.0.1:31001"), Recovery: Recovery{NAK: nak.Config{Retry: -1}}})
	require.ErrorIs(t, err, ErrConfig)
	require.ErrorIs(t, err, nak.ErrConfig)
	require.ErrorContains(t, err, "Recovery.NAK")
	require.ErrorContains(t, err, "Retry -1ns")
}
