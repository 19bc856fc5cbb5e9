package main

import (
	"io"
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

func TestParseAddrs(t *testing.T) {
	got, err := parseAddrs("--retransmit", "10.0.0.5:30100, 10.0.0.6:30100")
	require.NoError(t, err)
	require.Equal(t, []netip.AddrPort{netip.MustParseAddrPort("10.0.0.5:30100"), netip.MustParseAddrPort("10.0.0.6:30100")}, got)
	none, err := parseAddrs("--retransmit", "")
	require.NoError(t, err)
	require.Empty(t, none)
	for _, bad := range []string{"10.0.0.5", "10.0.0.5:1,,10.0.0.6:1", "239.1.1.1:5000", "10.0.0.5:1,x"} {
		_, err := parseAddrs("--retransmit", bad)
		require.Error(t, err, bad)
		require.Contains(t, err.Error(), "--retransmit")
	}
}

// TestSubBackupErrors: a list the subscriber refuses says why before
// anything is opened.
func TestSubBackupErrors(t *testing.T) {
	for bad, why := range map[string]string{
		"127.0.0.1:5000,[::1]:5000":     "address family",
		"127.0.0.1:5000,127.0.0.1:5000": "listed twice",
		"127.0.0.1:1,127.0.0.2:1,127.0.0.3:1,127.0.0.4:1,127.0.0.5:1,127.0.0.6:1,127.0.0.7:1,127.0.0.8:1,127.0.0.9:1": "at most",
	} {
		err := runSub(t.Context(), []string{"--group", "239.1.1.1:5000", "--retransmit", bad}, io.Discard)
		require.ErrorContains(t, err, why, bad)
	}
}
