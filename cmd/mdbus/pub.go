package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"time"

	"github.com/mdbus/mdbus/publisher"
	"github.com/mdbus/mdbus/retransmit"
	"github.com/mdbus/mdbus/tools/synth"
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

func runPub(ctx context.Context, args []string, stdout io.Writer) error {
	fs := newFlags("pub", "[flags]", `Publishes MoldUDP64 packets to a multicast group. Without --synthetic it sends
each line of standard input as one message (the newline removed) and ends
the session at end of input; with --synthetic it generates ITCH-shaped
order-book messages at --rate until --count messages or --duration.`)
	gf := addGroupFlags(fs)
	ttl := fs.Int("ttl", 0, "multicast TTL / hop limit; 0 keeps packets on this host")
	session := fs.String("session", "", "session name, 1-10 printable characters (default: random)")
	payload := fs.Int("payload", 0, "max UDP payload bytes per packet (default fits a 1500-byte MTU)")
	hb := fs.Duration("heartbeat", time.Second, "heartbeat interval when idle")
	linger := fs.Duration("linger", 0, "how long a partly filled packet may wait for more messages (0: send at once; e.g. 500us for throughput)")
	rate := fs.Float64("rate", 0, "messages per second (0 = unlimited; --synthetic defaults to 10000)")
	rateBytes := fs.Float64("rate-bytes", 0, "bytes per second cap (0 = unlimited)")
	syn := fs.Bool("synthetic", false, "generate synthetic market data instead of reading stdin")
	count := fs.Int("count", 0, "with --synthetic: messages to send (0 = until --duration or interrupted)")
	dur := fs.Duration("duration", 0, "with --synthetic: how long to send (0 = until --count or interrupted)")
	seed := fs.Uint64("seed", 1, "with --synthetic: data seed")
	retr := fs.String("retransmit", "", "also run an in-process cache and re-request server on this unicast address:port (e.g. 127.0.0.1:31100)")
	repair := fs.String("repair-group", "", "with --retransmit: multicast group:port for repairs (optional)")
	jf := addJournalWriteFlags(fs, false)
	if err := fs.Parse(args); err != nil {
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
	var sinks []publisher.Sink
	if *retr != "" {
		l, err := parseAddr("--retransmit", *retr, false)
		if err != nil {
			return err
		}
		rg, err := parseAddr("--repair-group", *repair, true)
		if err != nil {
			return err
		}
		cache := retransmit.NewCache(retransmit.CacheConfig{})
		srv, err := retransmit.NewServer(retransmit.ServerConfig{Listen: l, Sources: []retransmit.Source{cache},
			RepairGroup: rg, Interface: *gf.ifname, TTL: *ttl})
		if err != nil {
			return err
		}
		defer srv.Close()
		sinks = append(sinks, cache)
		fmt.Fprintf(os.Stderr, "mdbus pub: re-requests on %s\n", srv.Addr())
	}
	var pj *pubJournal
	if j, err := jf.open(); err != nil || j != nil {
		if err != nil {
			return err
		}
		pj = &pubJournal{j: j}
		sinks = append(sinks, pj)
	}
	pub, err := publisher.New(publisher.Config{
		Group: group, Interface: *gf.ifname, Source: source, TTL: *ttl, Session: *session,
		PayloadSize: *payload, HeartbeatInterval: *hb, RateMessages: *rate, RateBytes: *rateBytes,
		Linger: *linger, Sinks: sinks,
	})
	if err != nil {
		if pj != nil {
			pj.j.Close()
		}
		return err
	}
	if pj != nil {
		if err := pj.start(pub); err != nil {
			pub.Close()
			pj.finish(pub)
			return err
		}
	}
	fmt.Fprintf(os.Stderr, "mdbus pub: session %s -> %s via %s (ttl %d)\n", pub.Session(), group, *gf.ifname, *ttl)
	var sent int
	if *syn {
		sent, err = pubSynthetic(ctx, pub, *count, *dur, *seed)
	} else {
		sent, err = pubLines(ctx, pub, os.Stdin)
	}
	cerr := pub.Close()
	if pj != nil {
		cerr = errors.Join(cerr, pj.finish(pub))
	}
	st := pub.Stats()
	fmt.Fprintf(os.Stderr, "mdbus pub: sent %d messages in %d packets, next sequence %d\n", sent, st.Packets, pub.NextSeq())
	if err != nil {
		return err
	}
	return cerr
}

func pubSynthetic(ctx context.Context, pub *publisher.Publication, count int, dur time.Duration, seed uint64) (int, error) {
	g := synth.New(seed)
	var end <-chan time.Time
	if dur > 0 {
		end = time.After(dur)
	}
	var buf []byte
	for n := 0; count == 0 || n < count; n++ {
		if n%256 == 0 {
			select {
			case <-ctx.Done():
				return n, nil
			case <-end:
				return n, nil
			default:
			}
		}
		buf = g.Next(buf[:0])
		if _, err := pub.Publish(buf); err != nil {
			return n, err
		}
	}
	return count, nil
}

func pubLines(ctx context.Context, pub *publisher.Publication, in io.Reader) (int, error) {
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 64<<10), wire.MaxPayloadSize)
	n := 0
	for sc.Scan() {
		if ctx.Err() != nil {
			return n, nil
		}
		if _, err := pub.Publish(sc.Bytes()); err != nil {
			return n, fmt.Errorf("line %d: %w", n+1, err)
		}
		n++
	}
	if err := sc.Err(); err != nil {
		return n, fmt.Errorf("read stdin after line %d: %w", n, err)
	}
	return n, nil
}
