package main

import (
	"context"
	"flag"
	"time"

	"github.com/mdbus/mdbus/retransmit"
	"github.com/mdbus/mdbus/subscriber"
)

// feedFlags are the flags of a command that joins a feed as a subscriber
// (sub, fanout): where the feed is, who repairs it, and how its socket
// reads. Each command maps them to a subscriber.Config with config.
type feedFlags struct {
	groupFlags
	retransmit *string
	rcvbuf     *int
	noGRO      *bool
	busy       *time.Duration
	procs      *int
}

func addFeedFlags(fs *flag.FlagSet) feedFlags {
	return feedFlags{
		groupFlags: addGroupFlags(fs),
		retransmit: fs.String("retransmit", "", "unicast address:port of the retransmitter (pub --retransmit or rewind) to send re-requests to; a comma-separated list adds backups, asked in turn when the one asked stops answering"),
		rcvbuf:     fs.Int("rcvbuf", 0, "feed socket receive buffer bytes to request (default 4 MiB)"),
		noGRO:      fs.Bool("no-gro", false, "read the feed without UDP_GRO (one datagram per read slot; for comparing, or a kernel whose GRO misbehaves)"),
		busy:       fs.Duration("busy-poll", 0, "spin on the feed socket this long before sleeping (0-10ms): lower latency for a CPU"),
		procs:      addProcsFlag(fs, "one per feed reader (two for sub --secondary unless given), which also takes the repairs and sends the re-requests"),
	}
}

// setProcs gives this process one Go processor per feed reader (feeds)
// unless --procs or a GOMAXPROCS variable says otherwise (procs.go).
func (f feedFlags) setProcs(fs *flag.FlagSet, feeds int) error {
	return applyProcs(fs, *f.procs, feeds)
}

// config returns the subscriber configuration the flags name: group,
// interface, source, retransmitters and the socket's receive settings,
// with the CLI's logger. It is a usage error if one does not parse.
func (f feedFlags) config() (subscriber.Config, error) {
	group, source, err := f.parse()
	if err != nil {
		return subscriber.Config{}, err
	}
	retr, backups, err := parseRetransmitters("--retransmit", *f.retransmit)
	if err != nil {
		return subscriber.Config{}, err
	}
	if *f.rcvbuf < 0 {
		return subscriber.Config{}, usageErr("--rcvbuf %d: must not be negative (0 = the default, 4 MiB)", *f.rcvbuf)
	}
	return subscriber.Config{
		Group: group, Interface: *f.ifname, Source: source,
		Recovery: subscriber.Recovery{Retransmitter: retr, Backups: backups},
		Receive:  subscriber.Receive{ReadBuffer: *f.rcvbuf, DisableGRO: *f.noGRO, BusyPoll: *f.busy},
		Logger:   env.log,
	}, nil
}

// goWatchDrops runs watchDrops for who every second until the returned
// stop is called; stop waits for its last look.
func goWatchDrops(ctx context.Context, who string, stats func() subscriber.Stats) (stop func()) {
	wctx, cancel := context.WithCancel(ctx)
	watched := make(chan struct{})
	go func() { defer close(watched); watchDrops(wctx, who, stats, time.Second) }()
	return func() { cancel(); <-watched }
}

// ticker ticks every d; with d <= 0 it returns a nil channel, which never
// ticks. Call stop when done.
func ticker(d time.Duration) (tick <-chan time.Time, stop func()) {
	if d <= 0 {
		return nil, func() {}
	}
	t := time.NewTicker(d)
	return t.C, t.Stop
}

// runFor returns a context that ends with ctx, after d (if d > 0), or
// when stop is called: a command's run, which --duration, --count or an
// end of session cut short.
func runFor(ctx context.Context, d time.Duration) (run context.Context, stop context.CancelFunc) {
	if d > 0 {
		return context.WithTimeout(ctx, d)
	}
	return context.WithCancel(ctx)
}

// serverFlags are the flags of a re-request server a command runs (pub
// --retransmit, rewind): where repairs go and who may ask.
type serverFlags struct {
	repair, allow *string
	unicastFirst  *bool
}

// addServerFlags adds them; with prefixes the usages of the optional ones
// ("with --retransmit: "), repairUsage says what the repair group carries.
func addServerFlags(fs *flag.FlagSet, with, repairUsage string) serverFlags {
	return serverFlags{
		repair:       fs.String("repair-group", "", with+repairUsage),
		unicastFirst: fs.Bool("unicast-first", false, "with --repair-group: answer a range's first re-request unicast, the group only when a second subscriber asks (for one subscriber)"),
		allow:        fs.String("allow", "", with+"networks re-requests are accepted from, CIDR,... (default: anyone)"),
	}
}

// config returns the server configuration the flags name, listening on
// listen (the value of flag listenFlag). It is a usage error if one does
// not parse.
func (f serverFlags) config(listenFlag, listen string) (retransmit.ServerConfig, error) {
	l, err := parseAddr(listenFlag, listen, false)
	if err != nil {
		return retransmit.ServerConfig{}, err
	}
	rg, err := parseAddr("--repair-group", *f.repair, true)
	if err != nil {
		return retransmit.ServerConfig{}, err
	}
	nets, err := parseAllow(*f.allow)
	if err != nil {
		return retransmit.ServerConfig{}, err
	}
	return retransmit.ServerConfig{Listen: l, RepairGroup: rg, UnicastFirst: *f.unicastFirst, Allow: nets}, nil
}
