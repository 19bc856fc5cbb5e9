package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/netip"
	"strings"

	"github.com/mdbus/mdbus/tools/statsd"
)

// maxStatsdDatagram is the largest UDP payload over IPv4.
const maxStatsdDatagram = 65507

// runStatsdSend is a minimal StatsD client: one datagram per line, to the
// relay's UDP address. It exists so that scripts and the README can feed a
// relay with nothing but a POSIX shell and this binary (dash has no
// /dev/udp, and nc or python are not everywhere).
func runStatsdSend(_ context.Context, args []string, stdin io.Reader) error {
	fs := newFlags("statsd send", "[flags] [LINE...]", `Sends StatsD/DogStatsD lines to a relay (or any StatsD agent) over UDP, one
datagram per LINE argument; with no LINE, one datagram per line of stdin
(empty lines skipped). Fire and forget, as any StatsD client: nothing says
whether something listens at --to. Flags go before the lines.

  mdbus statsd send 'app.req:1|c' 'app.lat:12|ms|#env:prod'
  printf 'app.req:1|c\n' | mdbus statsd send --to 127.0.0.1:8125`)
	to := fs.String("to", statsd.DefaultListen, "UDP address:port to send to (IPv4 or IPv6, e.g. [::1]:8125)")
	fs.Bool("netns", false, "run inside a private user+network namespace")
	if err := parseSome(fs, args); err != nil {
		return err
	}
	dst, err := netip.ParseAddrPort(*to)
	if err != nil {
		return usageErr("--to %q: want address:port, like 127.0.0.1:8125 or [::1]:8125", *to)
	}
	lines := fs.Args()
	for _, l := range lines {
		if strings.HasPrefix(l, "-") {
			return usageErr("%q after a LINE: flags go before the lines", l)
		}
	}
	network := "udp4"
	if dst.Addr().Unmap().Is6() {
		network = "udp6"
	}
	// Unconnected, so that a relay that is not (yet) listening costs no
	// ICMP error on a later write: StatsD is fire and forget.
	c, err := net.ListenUDP(network, nil)
	if err != nil {
		return fmt.Errorf("socket for %s: %w", dst, err)
	}
	defer c.Close()
	send := func(line string) error {
		if len(line) > maxStatsdDatagram {
			return fmt.Errorf("a line of %d bytes is beyond one UDP datagram (%d)", len(line), maxStatsdDatagram)
		}
		if _, err := c.WriteToUDPAddrPort([]byte(line), dst); err != nil {
			return fmt.Errorf("send to %s: %w", dst, err)
		}
		return nil
	}
	if len(lines) > 0 {
		for _, l := range lines {
			if err := send(l); err != nil {
				return err
			}
		}
		return nil
	}
	sc := bufio.NewScanner(stdin)
	sc.Buffer(make([]byte, 0, 4096), maxStatsdDatagram+1)
	for sc.Scan() {
		if l := strings.TrimSuffix(sc.Text(), "\r"); l != "" {
			if err := send(l); err != nil {
				return err
			}
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("reading stdin: %w (a line may hold at most %d bytes)", err, maxStatsdDatagram)
	}
	return nil
}
