package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/mdbus/mdbus/recorder"
	"github.com/mdbus/mdbus/retransmit"
	"github.com/mdbus/mdbus/tools/counters"
)

func init() {
	register("rewind", "cache a feed and answer re-requests, so repairs survive a publisher crash", runRewind)
}

func runRewind(ctx context.Context, args []string, stdout io.Writer) error {
	fs := newFlags("rewind", "[flags]", `Joins a feed, caches every message it delivers and answers MoldUDP64
re-requests from that cache on --listen, unicast to the requester or on
--repair-group. When a session falls silent (its publisher died), it
multicasts heartbeats for it on --repair-group so subscribers still find
their tail loss. With --upstream it asks that retransmitter for whatever its
own socket missed, so its history has no holes; with --journal it also
journals the feed and answers ranges that fell out of the cache from disk.`)
	gf := addGroupFlags(fs)
	listen := fs.String("listen", "127.0.0.1:31100", "unicast address:port for re-requests")
	sf := addServerFlags(fs, "", "multicast group:port for repairs and heartbeats (optional)")
	always := fs.Bool("always-multicast", false, "answer every re-request on --repair-group (the default now; kept for old scripts)")
	maxMsgs := countFlag(fs, "cache-messages", 0, "messages to keep (default 1048576)")
	maxBytes := countFlag(fs, "cache-bytes", 0, "bytes to keep (default 256 MiB)")
	rate := rateFlag(fs, "rate-bytes", 0, "repair bandwidth cap, bytes/s (default 100 MB/s; raised to 4x the feed's rate)")
	rcvbuf := fs.Int("rcvbuf", 0, "feed socket receive buffer bytes to request (default 32 MiB)")
	stats := fs.Duration("stats", time.Second, "stats line interval (0 = none)")
	upstream := fs.String("upstream", "", "unicast address:port of a retransmitter (pub --retransmit, another rewind) to fill this rewinder's own holes from; a comma-separated list adds backups, asked in turn when one stops answering")
	jf := addJournalWriteFlags(fs, false)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *maxMsgs < 0 || *maxBytes < 0 || *rate < 0 || *rcvbuf < 0 || *stats < 0 {
		return usageErr("--cache-messages, --cache-bytes, --rate-bytes, --rcvbuf and --stats must not be negative")
	}
	group, source, err := gf.parse()
	if err != nil {
		return err
	}
	scfg, err := sf.config("--listen", *listen)
	if err != nil {
		return err
	}
	scfg.Interface, scfg.AlwaysMulticast, scfg.RateBytes = *gf.ifname, *always && !scfg.UnicastFirst, *rate
	up, upBackups, err := parseRetransmitters("--upstream", *upstream)
	if err != nil {
		return err
	}
	j, err := jf.open()
	if err != nil {
		return err
	}
	if j != nil {
		defer j.Close()
	}
	rw, err := recorder.NewRewinder(recorder.RewinderConfig{
		Feed: group, Interface: *gf.ifname, Source: source, ReadBuffer: *rcvbuf, Upstream: up, UpstreamBackups: upBackups, Journal: j,
		Cache:  retransmit.CacheConfig{MaxMessages: *maxMsgs, MaxBytes: *maxBytes},
		Server: scfg,
	})
	if err != nil {
		return err
	}
	defer rw.Close()
	ops, err := startOps("rewind")
	if err != nil {
		return err
	}
	defer ops.Close()
	counters.AttachRewinder(ops.Counters(), "rewind", rw)
	defer goWatchDrops(ctx, "rewind feed", rw.FeedStats)()
	defer func() {
		cs, ss, fs := rw.Cache().Stats(), rw.ServerStats(), rw.FeedStats()
		env.log.Info("summary", "feed_messages", fs.Messages, "feed_gaps", fs.Gaps, "feed_lost", fs.LostMessages,
			"cached", cs.Messages, "cached_bytes", cs.Bytes, "sessions", cs.Sessions,
			"requests", ss.Requests, "answered", ss.Answered, "refused", ss.Refused.Total(),
			"unicast_packets", ss.UnicastPackets, "multicast_packets", ss.MulticastPackets, "repair_bytes", ss.Bytes())
	}()
	env.log.Info("rewinding", "feed", group.String(), "re-requests", rw.Addr().String())
	tick, stopTick := ticker(*stats)
	defer stopTick()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick:
			cs, ss := rw.Cache().Stats(), rw.ServerStats()
			fmt.Fprintf(stdout, "%s cached %d msgs %d bytes in %d sessions | requests %d answered %d refused %d | repairs %d unicast %d multicast, %d bytes\n",
				time.Now().Format("15:04:05"), cs.Messages, cs.Bytes, cs.Sessions, ss.Requests, ss.Answered, ss.Refused.Total(),
				ss.UnicastPackets, ss.MulticastPackets, ss.Bytes())
		}
	}
}
