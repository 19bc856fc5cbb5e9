package main

import (
	"context"
	"errors"
	"io"
	"net/netip"

	"github.com/mdbus/mdbus/publisher"
	"github.com/mdbus/mdbus/tools/demo"
)

func init() {
	register("demo", "one publisher, three subscribers, live stats and a summary (in a private netns by default)", runDemo)
}

func runDemo(ctx context.Context, args []string, stdout io.Writer) error {
	fs := newFlags("demo", "[flags]", `Runs one publisher and several subscribers in this process on a multicast
group, publishes synthetic ITCH-shaped market data for a few seconds, prints
a stats line per second and a final summary per subscriber (delivered, in
order, duplicates, gaps, content hash). By default it runs inside a private
network namespace, so nothing can reach your network; --netns=false runs it
on this host's loopback interface with TTL 0 (lo must have multicast on).`)
	netns := fs.Bool("netns", true, "run inside a private user+network namespace (set false to use the host's lo)")
	group := fs.String("group", "239.192.0.1:31001", "multicast group:port")
	ifname := fs.String("interface", "lo", "multicast interface")
	subs := countFlag(fs, "subscribers", 3, "number of subscribers (1-64)")
	dur := fs.Duration("duration", 0, "how long to publish (default 5s)")
	rate := rateFlag(fs, "rate", 200_000, "messages per second, like 50k or 1M")
	seed := fs.Uint64("seed", 1, "market data seed")
	loss := probFlag(fs, "loss", 0, "each subscriber drops this fraction of received datagrams (0-1): watch NAKs and repairs")
	reorder := probFlag(fs, "reorder", 0, "each subscriber reorders this fraction of received datagrams (0-1)")
	dup := probFlag(fs, "dup", 0, "each subscriber duplicates this fraction of received datagrams (0-1)")
	noRewind := fs.Bool("no-rewinder", false, "do not run the rewinder (no retransmission: losses stay lost)")
	linger := fs.Duration("linger", 0, "how long the publisher lets a partly filled packet wait for more messages (0: send at once; 50us packs about 20 messages a packet at the default rate, so that the host has CPU to spare for recovery under loss)")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of the whole demo (publisher, rewinder, subscribers) to this file")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	_ = netns
	g, err := netip.ParseAddrPort(*group)
	if err != nil {
		return usageErr("--group %q: want a multicast address and port, like 239.192.0.1:31001 or [ff15::1]:31001", *group)
	}
	if *rate <= 0 {
		return usageErr("--rate %v: must be positive", *rate)
	}
	if *subs < 1 || *subs > 64 {
		return usageErr("--subscribers %d: want 1 to 64", *subs)
	}
	if *linger < 0 || *linger > publisher.MaxLinger {
		return usageErr("--linger %v: want 0 to %v", *linger, publisher.MaxLinger)
	}
	if *cpuProfile != "" {
		stop, err := startCPUProfile(*cpuProfile)
		if err != nil {
			return err
		}
		defer stop()
	}
	ops, err := startOps("demo")
	if err != nil {
		return err
	}
	defer ops.Close()
	sum, err := demo.Run(ctx, demo.Config{
		Group: g, Interface: *ifname, Subscribers: *subs, Duration: *dur,
		Rate: *rate, Seed: *seed, Out: stdout,
		Loss: *loss, Reorder: *reorder, Dup: *dup, NoRewinder: *noRewind, Linger: *linger,
		Counters: ops.Counters(),
	})
	if err != nil {
		return err
	}
	if !sum.Complete() && ctx.Err() == nil { // an interrupted run has printed its summary: exit 0
		return errors.New("not every subscriber delivered the complete stream")
	}
	return nil
}
