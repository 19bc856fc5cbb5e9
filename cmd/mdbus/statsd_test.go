package main

import (
	"bytes"
	"net"
	"net/netip"
	"os"
	"strings"
	"testing"

	"github.com/mdbus/mdbus/internal/netlab"
	"github.com/stretchr/testify/require"
)

// inLab runs the calling test inside the private network lab: outside it,
// the test binary re-executes itself there for this test alone and reports
// true when it ran (the caller returns); inside, it sets the lab's network
// up and reports false (the caller goes on). It skips where no namespace
// can be made, or fails under CI=true, as netlab.Require does.
func inLab(t *testing.T) (ranElsewhere bool) {
	t.Helper()
	if netlab.Inside() {
		require.NoError(t, netlab.Setup())
		return false
	}
	args := []string{os.Args[0], "-test.run=^" + t.Name() + "$", "-test.count=1"}
	if testing.Verbose() {
		args = append(args, "-test.v")
	}
	code, err := netlab.Reexec(args, nil)
	if err != nil {
		netlab.Require(t)
	}
	require.Zero(t, code, "%s inside the lab failed (its output is above)", t.Name())
	return true
}

// TestStatsdPortTaken: when an address a StatsD command needs is held by
// another process, the command exits 1 with one line that names the
// address and the flag that moves it; nothing panics.
func TestStatsdPortTaken(t *testing.T) {
	if inLab(t) {
		return
	}
	udp := func(at string) (*net.UDPConn, string) {
		c, err := net.ListenUDP("udp4", net.UDPAddrFromAddrPort(netip.MustParseAddrPort(at)))
		require.NoError(t, err)
		t.Cleanup(func() { c.Close() })
		return c, c.LocalAddr().String()
	}
	_, statsdPort := udp("127.0.0.1:0")
	_, retrPort := udp("127.0.0.1:0")
	groupHolder, _ := udp("0.0.0.0:0") // no SO_REUSEPORT: nobody may share it
	group := netip.AddrPortFrom(netip.MustParseAddr("239.192.0.99"), uint16(groupHolder.LocalAddr().(*net.UDPAddr).Port)).String()
	promL, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer promL.Close()
	sockPath := t.TempDir() + "/statsd.sock"
	ux, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: sockPath, Net: "unixgram"})
	require.NoError(t, err)
	defer ux.Close()

	for _, tc := range []struct {
		args []string
		want []string // in the one line on stderr
	}{
		{[]string{"relay", "--listen", statsdPort, "--retransmit", "127.0.0.1:0"}, []string{"udp " + statsdPort, "already in use", "--listen"}},
		{[]string{"relay", "--listen", "127.0.0.1:0", "--retransmit", retrPort}, []string{"retransmit " + retrPort, "already in use", "--retransmit"}},
		{[]string{"relay", "--no-udp", "--unix", sockPath}, []string{"unix " + sockPath, "already in use", "--unix"}},
		{[]string{"collect", "--prometheus", promL.Addr().String()}, []string{"--prometheus " + promL.Addr().String(), "already in use"}},
		{[]string{"collect", "--group", group}, []string{"group port " + group, "--group"}},
		{[]string{"--metrics", promL.Addr().String(), "relay"}, []string{"--metrics " + promL.Addr().String()}},
		{[]string{"--metrics", promL.Addr().String(), "collect"}, []string{"--metrics " + promL.Addr().String()}},
	} {
		var out, errb bytes.Buffer
		args := []string{"mdbus", "--counters=false", "statsd"}
		if tc.args[0] == "--metrics" { // a global flag
			args = append(append([]string{"mdbus", "--counters=false"}, tc.args[:2]...), "statsd")
			tc.args = tc.args[2:]
		}
		args = append(args, tc.args...)
		code := run(append(args, "--duration", "2s"), &out, &errb)
		msg := errb.String()
		require.Equal(t, 1, code, "%v: %s", tc.args, msg)
		require.Equal(t, 1, strings.Count(msg, "\n"), "%v: one line: %s", tc.args, msg)
		for _, w := range tc.want {
			require.Contains(t, msg, w, tc.args)
		}
		require.NotContains(t, msg, "panic", tc.args)
		t.Logf("%v: %s", tc.args, strings.TrimSpace(msg))
	}
}
