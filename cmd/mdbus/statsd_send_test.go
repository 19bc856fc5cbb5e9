package main

import (
	"bytes"
	"context"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestStatsdSend: statsd send puts each LINE argument, or each non-empty
// line of stdin, in a datagram of its own to --to; a flag after a line and
// a bad --to are usage errors (exit 2).
func TestStatsdSend(t *testing.T) {
	if inLab(t) {
		return
	}
	c, err := net.ListenUDP("udp4", net.UDPAddrFromAddrPort(netip.MustParseAddrPort("127.0.0.1:0")))
	require.NoError(t, err)
	defer c.Close()
	to := c.LocalAddr().String()
	recv := func(n int) []string {
		t.Helper()
		var got []string
		buf := make([]byte, 65536)
		for range n {
			require.NoError(t, c.SetReadDeadline(time.Now().Add(5*time.Second)))
			k, _, err := c.ReadFromUDPAddrPort(buf)
			require.NoError(t, err)
			got = append(got, string(buf[:k]))
		}
		return got
	}

	var out, errb bytes.Buffer
	code := run([]string{"mdbus", "--counters=false", "statsd", "send", "--to", to, "app.req:1|c", "app.lat:12|ms|#env:prod"}, &out, &errb)
	require.Zero(t, code, "%s", errb.String())
	require.Equal(t, []string{"app.req:1|c", "app.lat:12|ms|#env:prod"}, recv(2))

	err = runStatsdSend(context.Background(), []string{"--to", to}, strings.NewReader("a:1|c\n\nb:2|g\r\nc:3|s"))
	require.NoError(t, err)
	require.Equal(t, []string{"a:1|c", "b:2|g", "c:3|s"}, recv(3))

	for _, args := range [][]string{
		{"app.req:1|c", "--to", to},
		{"--to", "localhost", "app.req:1|c"},
		{"--to", "127.0.0.1:8125:1", "app.req:1|c"},
	} {
		out.Reset()
		errb.Reset()
		code := run(append([]string{"mdbus", "--counters=false", "statsd", "send"}, args...), &out, &errb)
		require.Equal(t, 2, code, "%v: %s", args, errb.String())
		require.Equal(t, 1, strings.Count(errb.String(), "\n"), "one line: %s", errb.String())
	}
	err = runStatsdSend(context.Background(), []string{"--to", to, strings.Repeat("x", maxStatsdDatagram+1)}, nil)
	require.ErrorContains(t, err, "beyond one UDP datagram")
}
