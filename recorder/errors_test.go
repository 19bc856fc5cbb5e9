package recorder

import (
	"net"
	"net/netip"
	"strings"
	"syscall"
	"testing"

	"github.com/mdbus/mdbus/journal"
	"github.com/mdbus/mdbus/retransmit"
	"github.com/mdbus/mdbus/subscriber"
	"github.com/mdbus/mdbus/wire"
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
	require.Equal(t, 1, strings.Count(msg, taken.String()), "the address once: %s", msg)
	requireEachOnce(t, msg, "recorder", "retransmit", "sock")
}

// A journal error of the recorder's tap names the recorder and the
// journal once each.
func TestTapJournalErrorSaysEachThingOnce(t *testing.T) {
	dir := t.TempDir()
	j, err := journal.Open(dir, journal.Config{})
	require.NoError(t, err)
	require.NoError(t, j.Close())
	j, err = journal.Open(dir, journal.Config{ReadOnly: true})
	require.NoError(t, err)
	defer j.Close()
	tp := newTap(j, discard)
	s, _ := wire.ParseSession("RO")
	tp.message(subscriber.Message{Stream: subscriber.StreamID{Source: netip.MustParseAddrPort("127.0.0.1:5"), Session: s}, Seq: 1, Data: []byte{1}})
	_, err = tp.stats()
	require.Error(t, err)
	require.NoError(t, tp.close())
	requireEachOnce(t, err.Error(), "recorder", "journal")
}

// requireEachOnce fails unless no ": "-separated segment of msg starts
// with the same word as another, and each of layers starts one.
func requireEachOnce(t *testing.T, msg string, layers ...string) {
	t.Helper()
	t.Log(msg)
	seen := map[string]bool{}
	for _, seg := range strings.Split(msg, ": ") {
		word := strings.Fields(seg)[0]
		require.False(t, seen[word], "%q twice in %q", word, msg)
		seen[word] = true
	}
	for _, l := range layers {
		require.True(t, seen[l], "%s names its layer: %s", l, msg)
	}
}
