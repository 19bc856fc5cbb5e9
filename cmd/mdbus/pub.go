package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"strings"
	"time"

	"github.com/mdbus/mdbus/internal/oneway"
	"github.com/mdbus/mdbus/journal"
	"github.com/mdbus/mdbus/publisher"
	"github.com/mdbus/mdbus/retransmit"
	"github.com/mdbus/mdbus/tools/counters"
	"github.com/mdbus/mdbus/wire"
)

func init() {
	register("pub", "publish lines from stdin, or synthetic market data, to a multicast group", runPub)
}

// groupFlags are the flags shared by the commands that use a group.
type groupFlags struct {
	group, ifname, source *string
	netns                 *bool
}

func addGroupFlags(fs interface {
	String(name, value, usage string) *string
	Bool(name string, value bool, usage string) *bool
}) groupFlags {
	return groupFlags{
		group:  fs.String("group", "239.192.0.1:31001", "multicast group:port (IPv4, or IPv6 like [ff15::1]:31001)"),
		ifname: fs.String("interface", "lo", "multicast interface; packets stay on this host with the defaults"),
		source: fs.String("source", "", "pub: local source address to bind; sub: SSM source filter"),
		netns:  fs.Bool("netns", false, "run inside a private user+network namespace"),
	}
}

func (g groupFlags) parse() (group netip.AddrPort, source netip.Addr, err error) {
	group, err = netip.ParseAddrPort(*g.group)
	if err != nil || !group.Addr().IsMulticast() {
		return group, source, usageErr("--group %q: want a multicast address and port, like 239.192.0.1:31001 or [ff15::1]:31001", *g.group)
	}
	if *g.source != "" {
		source, err = netip.ParseAddr(*g.source)
		if err != nil {
			return group, source, usageErr("--source %q: not an IP address", *g.source)
		}
	}
	return group, source, nil
}

// parseAddr parses an optional address:port flag: empty gives the zero
// AddrPort; multicast says which kind the flag wants.
func parseAddr(flagName, val string, multicast bool) (netip.AddrPort, error) {
	if val == "" {
		return netip.AddrPort{}, nil
	}
	a, err := netip.ParseAddrPort(val)
	if err != nil || a.Addr().IsMulticast() != multicast {
		kind := "a unicast address:port, like 127.0.0.1:31100"
		if multicast {
			kind = "a multicast group:port, like 239.192.0.2:31002"
		}
		return a, usageErr("%s %q: want %s", flagName, val, kind)
	}
	return a, nil
}

// parseAddrs parses a comma-separated list of unicast address:port
// (empty: none).
func parseAddrs(flagName, val string) ([]netip.AddrPort, error) {
	if val == "" {
		return nil, nil
	}
	var out []netip.AddrPort
	for f := range strings.SplitSeq(val, ",") {
		a, err := parseAddr(flagName, strings.TrimSpace(f), false)
		if err != nil {
			return nil, err
		}
		if !a.IsValid() {
			return nil, usageErr("%s %q: an empty address in the list", flagName, val)
		}
		out = append(out, a)
	}
	return out, nil
}

// parseRetransmitters parses a list of retransmitters: the first is asked
// first, the rest are its backups (subscriber.Config.Recovery.Backups).
func parseRetransmitters(flagName, val string) (first netip.AddrPort, backups []netip.AddrPort, err error) {
	all, err := parseAddrs(flagName, val)
	if len(all) == 0 || err != nil {
		return first, nil, err
	}
	return all[0], all[1:], nil
}

func runPub(ctx context.Context, args []string, stdout io.Writer) error {
	fs := newFlags("pub", "[flags]", `Publishes MoldUDP64 packets to a multicast group. Without --synthetic it sends
each line of standard input as one message (the newline removed) and ends
the session at end of input; with --synthetic it generates ITCH-shaped
order-book messages at --rate until --count messages or --duration
(--rate R --duration D sends R x D messages).

--synthetic paces the messages itself (message n is due n/R after the
first; no drift) and, with --stamp, writes the send moment into each
message's ITCH timestamp after its pacing wait, just before Publish: the
one-way latency sub --stats shows is the bus's, not the wait for a rate
slot.`)
	gf := addGroupFlags(fs)
	ttl := fs.Int("ttl", 0, "multicast TTL / hop limit; 0 keeps packets on this host")
	session := fs.String("session", "", "session name, 1-10 printable characters (default: random)")
	payload := fs.Int("payload", 0, "max UDP payload bytes per packet (default fits a 1500-byte MTU)")
	hb := fs.Duration("heartbeat", time.Second, "heartbeat interval when idle")
	linger := fs.Duration("linger", 0, "how long a partly filled packet may wait for more messages (0: send at once; e.g. 500us for throughput)")
	rate := rateFlag(fs, "rate", 0, "messages per second, like 200, 10k or 1.5M (0 = unlimited; --synthetic defaults to 10k)")
	rateBytes := rateFlag(fs, "rate-bytes", 0, "bytes per second cap (0 = unlimited)")
	syn := fs.Bool("synthetic", false, "generate synthetic market data instead of reading stdin")
	count := countFlag(fs, "count", 0, "with --synthetic: messages to send (0 = until --duration or interrupted)")
	dur := fs.Duration("duration", 0, "with --synthetic: how long to send (0 = until --count or interrupted)")
	seed := fs.Uint64("seed", 1, "with --synthetic: data seed")
	retr := fs.String("retransmit", "", "also run an in-process cache and re-request server on this unicast address:port (e.g. 127.0.0.1:31100)")
	sf := addServerFlags(fs, "with --retransmit: ", "multicast group:port for repairs, each preceded by a NAK confirm (optional)")
	stamp := fs.Bool("stamp", true, "with --synthetic: write the send moment (after the pacing wait, before Publish) into each message's ITCH timestamp (sub --stats shows one-way latency)")
	hold := fs.Duration("hold", 0, "after the last message, keep the session open this long (heartbeats, re-requests) before ending it")
	grace := fs.Duration("grace", 0, "after the end of session, keep repeating it (and answering re-requests with --retransmit) this long; default 1s with --retransmit or a journal, else none; negative: none")
	noGSO := fs.Bool("no-gso", false, "send every packet in its own sendmmsg slot instead of UDP GSO trains (GSO is used where the kernel offers it and falls back by itself)")
	jf := addJournalWriteFlags(fs, false)
	procs := addProcsFlag(fs, "one for the publishing loop, which sends its full packets itself and answers --retransmit's requests between sends, and one more for a --journal's writer")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	busy := 1
	if *jf.dir != "" {
		busy++
	}
	if err := applyProcs(fs, *procs, busy); err != nil {
		return err
	}
	group, source, err := gf.parse()
	if err != nil {
		return err
	}
	if *rate < 0 || *rateBytes < 0 || *count < 0 || *dur < 0 {
		return usageErr("--rate, --rate-bytes, --count and --duration must not be negative")
	}
	if *syn && *rate == 0 {
		*rate = 10_000
	}
	if *hold < 0 {
		return usageErr("--hold must not be negative")
	}
	var sinks []publisher.Sink
	var cache *retransmit.Cache
	var srv *retransmit.Server
	if *retr != "" {
		scfg, err := sf.config("--retransmit", *retr)
		if err != nil {
			return err
		}
		cache = retransmit.NewCache(retransmit.CacheConfig{})
		scfg.Sources, scfg.Interface, scfg.TTL = []retransmit.Source{cache}, *gf.ifname, *ttl
		srv, err = retransmit.NewServer(scfg)
		if err != nil {
			return err
		}
		defer srv.Close() // after pub.Close and its grace: re-requests for the tail are answered
		sinks = append(sinks, cache)
		env.log.Info("answering re-requests", "addr", srv.Addr().String())
	}
	jr, err := jf.open() // pub --journal: nil without
	if err != nil {
		return err
	}
	var jsink *journal.Sink
	if jr != nil {
		jsink = journal.NewSink(jr)
		sinks = append(sinks, jsink)
	}
	pubRate, inline := *rate, false
	if *syn {
		pubRate = 0           // pubSynthetic paces, so that it stamps after the wait
		inline = *linger == 0 // and sends what is due at once, on its goroutine
	}
	pub, err := publisher.New(publisher.Config{
		Group: group, Interface: *gf.ifname, Source: source, TTL: *ttl, Session: *session,
		PayloadSize: *payload, HeartbeatInterval: *hb, RateMessages: pubRate, RateBytes: *rateBytes,
		Linger: *linger, Inline: inline, Sinks: sinks, Grace: *grace, Logger: env.log, DisableGSO: *noGSO,
	})
	if err != nil {
		if jr != nil {
			jr.Close()
		}
		return err
	}
	// The journal's stream and the journal end after pub is closed.
	endJournal := func() error {
		if jr == nil {
			return nil
		}
		return errors.Join(jsink.End(pub.NextSeq()), jr.Close())
	}
	if jr != nil {
		if err := jsink.Start(pub.Session(), pub.LocalAddr(), pub.NextSeq()); err != nil {
			pub.Close()
			endJournal()
			return fmt.Errorf("journal session %s: %w", pub.Session(), err)
		}
	}
	ops, err := startOps("pub")
	if err != nil {
		pub.Close()
		endJournal()
		return err
	}
	defer ops.Close()
	counters.AttachPublisher(ops.Counters(), "pub", pub)
	if srv != nil {
		counters.AttachServer(ops.Counters(), "retransmit", srv.Stats)
		counters.AttachCache(ops.Counters(), "cache", cache, func() []wire.Session { return []wire.Session{pub.Session()} })
	}
	env.log.Info("publishing", "session", pub.Session().String(), "group", group.String(), "interface", *gf.ifname, "ttl", *ttl)
	var sent int
	if *syn {
		sent, err = pubSynthetic(ctx, pub, *count, *dur, *rate, *seed, *stamp)
	} else {
		sent, err = pubLines(ctx, pub, os.Stdin)
	}
	if err == nil && *hold > 0 {
		select { // heartbeats and re-requests go on; end of session after
		case <-ctx.Done():
		case <-time.After(*hold):
		}
	}
	cerr := pub.Close() // flushes and sends end of session
	cerr = errors.Join(cerr, endJournal())
	st := pub.Stats()
	attrs := []any{"session", pub.Session().String(), "published", sent, "messages", st.Messages, "packets", st.Packets,
		"bytes", st.Bytes, "heartbeats", st.Heartbeats, "send_errors", st.SendErrors, "next_seq", uint64(pub.NextSeq()),
		"gso", st.GSO, "gso_trains", st.GSOTrains, "gso_fallbacks", st.GSOFallbacks}
	if srv != nil {
		ss := srv.Stats()
		attrs = append(attrs, "requests", ss.Requests, "answered", ss.Answered, "refused", ss.Refused.Total(), "repair_bytes", ss.Bytes())
	}
	env.log.Info("summary", attrs...)
	if err != nil {
		return err
	}
	if cerr != nil {
		return fmt.Errorf("close: %w (packets may not have reached the group; check the interface and route)", cerr)
	}
	return nil
}

// parseAllow parses an --allow list of networks (CIDR), separated by
// commas; a bare address is its own network.
func parseAllow(val string) ([]netip.Prefix, error) {
	var nets []netip.Prefix
	for _, f := range strings.Split(val, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		p, err := netip.ParsePrefix(f)
		if err != nil {
			a, aerr := netip.ParseAddr(f)
			if aerr != nil {
				return nil, usageErr("--allow %q: want networks like 10.0.0.0/8,192.168.1.7/32,fd00::/8", f)
			}
			p = netip.PrefixFrom(a, a.BitLen())
		}
		nets = append(nets, p.Masked())
	}
	return nets, nil
}

// pubSynthetic publishes generated messages at rate (messages/s, > 0)
// until count messages, dur or ctx. It paces them itself: message n is
// due n/rate after the first (anchored, so no drift), so dur sends
// rate x dur messages. Whatever is due is stamped at once, after the
// wait, and handed to PublishBatch (inline: no goroutine hand-off, packed
// into full packets); a sender that falls behind sends what is due in
// batches of up to synthBatch, and stops at dur if still more than a
// batch behind.
func pubSynthetic(ctx context.Context, pub *publisher.Publication, count int, dur time.Duration, rate float64, seed uint64, stamp bool) (int, error) {
	return oneway.Feed(ctx, oneway.FeedConfig{Rate: rate, Count: count, Duration: dur, Seed: seed, Stamp: stamp},
		func(b [][]byte) error { _, err := pub.PublishBatch(b); return err })
}

func pubLines(ctx context.Context, pub *publisher.Publication, in io.Reader) (int, error) {
	// A read of standard input cannot be interrupted (a blocking pipe or
	// terminal ignores Close), so a reader goroutine hands lines over and
	// a signal ends the session at once. At a signal the reader may stay
	// blocked in read until the process exits, a few milliseconds later.
	type line struct {
		b   []byte
		err error
		end bool
	}
	lines := make(chan line, 256)
	quit := make(chan struct{})
	defer close(quit)
	go func() {
		sc := bufio.NewScanner(in)
		sc.Buffer(make([]byte, 64<<10), wire.MaxPayloadSize)
		for sc.Scan() {
			select {
			case lines <- line{b: bytes.Clone(sc.Bytes())}:
			case <-quit:
				return
			}
		}
		select {
		case lines <- line{err: sc.Err(), end: true}:
		case <-quit:
		}
		close(lines)
	}()
	n := 0
	for {
		select {
		case <-ctx.Done():
			return n, nil
		case l, ok := <-lines:
			switch {
			case !ok:
				return n, nil
			case l.err != nil:
				return n, fmt.Errorf("read stdin after line %d: %w", n, l.err)
			case l.end:
				return n, nil
			}
			if _, err := pub.Publish(l.b); err != nil {
				return n, fmt.Errorf("line %d: %w (messages must fit one packet: shorten the line or raise --payload)", n+1, err)
			}
			n++
		}
	}
}
