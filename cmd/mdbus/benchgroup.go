package main

import (
	"context"
	"fmt"
	"io"
	"net/netip"
	"strconv"
	"strings"

	"github.com/mdbus/mdbus/bench"
	"github.com/mdbus/mdbus/packetconn"
	"github.com/mdbus/mdbus/packetconn/impair"
)

const benchGroupUsage = `Measures recovery at group scale: one publisher with its retransmitter
(repairs on a repair group), a loss every subscriber shares (packets dropped
as the publisher sends them), and N subscriber processes with the shipped
defaults. For each subscriber count and loss it reports the re-requests and
repairs the retransmitter saw per lost packet, recovery time (p50, p99 of
the worst subscriber) and its two parts for ranges asked once (nak-p50:
gap found to re-request, mostly the NAK back-off that keeps requests near
one per loss; rep-p50: re-request to repair), messages lost, and how many
subscribers delivered every message once, in order, byte-identical. It
runs inside the private network lab.`

// benchGroup runs "mdbus bench group".
func benchGroup(ctx context.Context, args []string, stdout io.Writer) error {
	fs := newFlags("bench group", "[flags]", benchGroupUsage)
	fs.Bool("netns", true, "run inside a private user+network namespace")
	subsList := fs.String("subs", "1,4,16,32", "subscriber process counts, comma-separated (1-256)")
	lossList := fs.String("loss", "0.01", "shared loss fractions, comma-separated (0-0.5)")
	count := fs.Int("count", 200_000, "messages per run")
	rateS := fs.String("rate", "20k", "messages per second (10k, 1M)")
	size := fs.Int("size", 64, "message size in bytes (8-1400)")
	group := fs.String("group", "239.192.40.1:32200", "first multicast group:port (each run takes the next two ports)")
	subProcsN := addSubProcsFlag(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageErr("unexpected arguments %q", fs.Args())
	}
	rate, err := bench.ParseRate(*rateS, false)
	if err != nil {
		return usageErr("--rate: %v", clean(err))
	}
	g, err := netip.ParseAddrPort(*group)
	if err != nil || !g.Addr().Is4() || !g.Addr().IsMulticast() {
		return usageErr("--group %q: want an IPv4 multicast address and port", *group)
	}
	var subs []int
	for _, f := range strings.Split(*subsList, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 || n > 256 {
			return usageErr("--subs %q: want counts from 1 to 256, comma-separated", *subsList)
		}
		subs = append(subs, n)
	}
	losses, err := parseLosses(*lossList)
	if err != nil {
		return err
	}
	procs, err := benchProcs(fs, "sub-procs", *subProcsN)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "%-5s %-5s %8s %9s %9s %10s %10s %10s %10s %6s %8s\n", "loss", "subs", "lost-pkt", "req/loss", "rep/loss", "rec-p50", "rec-p99", "nak-p50", "rep-p50", "lost", "complete")
	port := g.Port()
	for _, loss := range losses {
		for _, n := range subs {
			var sendSide *impair.Conn
			res, err := bench.RunGroup(ctx, bench.GroupConfig{
				Subs: n, Count: *count, Rate: rate, Size: *size, Group: netip.AddrPortFrom(g.Addr(), port),
				Wrap: func(c packetconn.PacketConn) packetconn.PacketConn {
					return impair.Sender(impair.Config{Loss: loss, Seed: uint64(port), OnlyData: true,
						OnWrap: func(c *impair.Conn) { sendSide = c }})(c)
				},
				Dropped: func() uint64 { return sendSide.Stats().Dropped },
				Procs:   procs,
			})
			port += 2
			if err != nil {
				return fmt.Errorf("bench group: %d subscribers, loss %v: %w", n, loss, err)
			}
			fmt.Fprintf(stdout, "%-5.3g %-5d %8d %9.2f %9.2f %10v %10v %10v %10v %6d %5d/%d\n", loss, n, res.LostPackets,
				res.RequestsPerLoss, res.RepairsPerLoss, res.RecoveryP50, res.RecoveryP99, res.AskedP50, res.AnsweredP50, res.Lost, res.Complete, n)
			if ctx.Err() != nil {
				return nil
			}
		}
	}
	return nil
}

// parseLosses parses --loss: loss fractions above 0 and at most 0.5,
// comma-separated.
func parseLosses(list string) ([]float64, error) {
	var losses []float64
	for _, f := range strings.Split(list, ",") {
		l, err := strconv.ParseFloat(strings.TrimSpace(f), 64)
		if err != nil || !(l > 0) || l > 0.5 {
			return nil, usageErr("--loss %q: want fractions above 0 and at most 0.5, comma-separated", list)
		}
		losses = append(losses, l)
	}
	return losses, nil
}
