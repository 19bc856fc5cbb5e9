package main

import (
	"net/netip"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestParseAllow(t *testing.T) {
	got, err := parseAllow(" 10.0.0.0/8, 192.168.1.7,fd00::1/8,,::1 ")
	require.NoError(t, err)
	require.Equal(t, []netip.Prefix{
		netip.MustParsePrefix("10.0.0.0/8"),
		netip.MustParsePrefix("192.168.1.7/32"),
		netip.MustParsePrefix("fd00::/8"),
		netip.MustParsePrefix("::1/128"),
	}, got)
	none, err := parseAllow("")
	require.NoError(t, err)
	require.Empty(t, none, "empty: everyone")
	for _, bad := range []string{"10.0.0.0/33", "example.com", "10.0.0.1/8/2"} {
		_, err := parseAllow(bad)
		require.Error(t, err, bad)
		require.Contains(t, err.Error(), "--allow")
	}
}
