package recorder

import (
	"net"
	"net/netip"
	"strings"
	"syscall"
	"testing"

	"github.com/mdbus/mdbus/retransmit"
	"github.com/stretchr/testify/require"
)

// An error that crosses recorder, retransmit and sock names each
// package once and the address once (README "House conventions": each
// layer adds its prefix once, and no context the wrapped error already
// gives).
func TestRewinderListenErrorSaysEachThingOnce(t *testing.T) {
	held, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	require.NoError(t, err)
	defer held.Close()
	taken := held.LocalAddr().(*net.UDPAddr).AddrPort()
	_, err = NewRewinder(RewinderConfig{Feed: netip.MustParseAddrPort("239.1.2.3:5000"),
		Server: retransmit.ServerConfig{Listen: taken}})
	require.ErrorIs(t, err, syscall.EADDRINUSE)
	msg := err.Error()
	t.Log(msg)
	require.Equal(t, 1, strings.Count(msg, taken.String()), "the address once: %s", msg)
	seen := map[string]bool{}
	for _, seg := range strings.Split(msg, ": ") {
		word := strings.Fields(seg)[0]
		require.False(t, seen[word], "%q twice in %q", word, msg)
		seen[word] = true
	}
	for _, pkg := range []string{"recorder", "retransmit", "sock"} {
		require.True(t, seen[pkg], "%s names its layer: %s", pkg, msg)
	}
}
