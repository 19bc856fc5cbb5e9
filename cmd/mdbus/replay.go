package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/mdbus/mdbus/journal"
	"github.com/mdbus/mdbus/publisher"
	"github.com/mdbus/mdbus/replay"
	"github.com/mdbus/mdbus/tools/counters"
	"github.com/mdbus/mdbus/wire"
)

func init() {
	register("replay", "publish a journaled session (or a range of it) onto a group, paced, or print it", runReplay)
}

func runReplay(ctx context.Context, args []string, stdout io.Writer) error {
	fs := newFlags("replay", "--journal DIR [flags]", `Replays a journaled stream (mdbus record, pub --journal, rewind --journal)
onto a multicast group with the same session name and sequence numbers, at
the recorded pace (each message at its recorded offset from the first; no
drift accumulates), at --speed F, at --rate N msgs/s, --pps N packets/s,
--mbps N Mbit/s (of MoldUDP64 packet bytes) or as fast as possible (--max);
one pace at a time. Messages recorded with one timestamp (one received
packet) leave in one packet. --loop replays the range until interrupted,
--loop N N times (0 = until interrupted, as tcpreplay); each pass is a new
publisher incarnation. With --print it writes the messages to stdout
instead (as fast as possible unless a pace is given). A progress line goes
to stderr every --progress, and a summary (msgs/s, packets/s, Mbit/s) at
the end; Ctrl-C stops cleanly with the summary.

Pacing: a Go timer wakes up to ~1 ms late, so the replay sleeps on a timer
until --spin before each packet is due, then (on Linux) with nanosleep
until 200 µs before, then spins to the exact time: about 150 µs of one
core per packet (up to --spin, yielding, elsewhere).`)
	gf := addGroupFlags(fs)
	ttl := fs.Int("ttl", 0, "multicast TTL / hop limit; 0 keeps packets on this host")
	dir := fs.String("journal", "", "journal directory (required)")
	session := fs.String("session", "", "session to replay (default: the only session in the journal); its newest incarnation")
	from := fs.Uint64("from", 0, "first sequence to replay (default: the first held)")
	fromTime := fs.String("from-time", "", "start at the first message stamped at or after this time (RFC 3339, or ns since the epoch)")
	to := fs.Uint64("to", 0, "last sequence to replay, inclusive (default: the last held)")
	toTime := fs.String("to-time", "", "stop before the first message stamped after this time (RFC 3339, or ns since the epoch)")
	speed := rateFlag(fs, "speed", 1, "pace factor: 2 replays twice as fast, 0.5 at half speed (--max: as fast as possible)")
	rate := rateFlag(fs, "rate", 0, "fixed rate in messages/s instead of the recorded pace, like 500 or 10k")
	pps := rateFlag(fs, "pps", 0, "fixed rate in packets/s instead of the recorded pace")
	mbps := rateFlag(fs, "mbps", 0, "fixed rate in Mbit/s of MoldUDP64 packet bytes instead of the recorded pace")
	maxPace := fs.Bool("max", false, "as fast as possible")
	var loop loopFlag
	fs.Var(&loop, "loop", "replay the range `N` times (--loop alone or --loop 0: until interrupted)")
	spin := fs.Duration("spin", replay.DefaultSpin, "pacing: stop sleeping on a timer this long before a packet is due, then sleep precisely and spin (0 or negative: timer only, ~1 ms late)")
	printFmt := fs.String("print", "", "print to stdout instead of publishing: text, hex or json")
	decodeAs := addDecodeFlag(fs)
	progress := fs.Duration("progress", time.Second, "progress line interval on stderr (0 = none)")
	payload := fs.Int("payload", 0, "max UDP payload bytes per packet (default fits a 1500-byte MTU)")
	if err := parseFlags(fs, joinLoopCount(args)); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageErr("unexpected argument %q (flags only; -h for help)", fs.Arg(0))
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	var paces []string
	for _, name := range []string{"speed", "rate", "pps", "mbps", "max"} {
		if set[name] && (name != "max" || *maxPace) {
			paces = append(paces, "--"+name)
		}
	}
	switch {
	case *dir == "":
		return usageErr("--journal DIR is required")
	case len(paces) > 1:
		return usageErr("give one pace, not %s", strings.Join(paces, ", "))
	case !(*speed > 0) || math.IsInf(*speed, 0):
		return usageErr("--speed %v: want a positive factor like 0.5, 1 or 10 (--max replays as fast as possible)", *speed)
	case !(*rate >= 0) || !(*pps >= 0) || !(*mbps >= 0) || *progress < 0:
		return usageErr("--rate, --pps, --mbps and --progress must not be negative")
	case *printFmt != "" && *printFmt != "text" && *printFmt != "hex" && *printFmt != "json":
		return usageErr("--print %q: want text, hex or json", *printFmt)
	case *from != 0 && *fromTime != "":
		return usageErr("give --from or --from-time, not both")
	}
	dec, err := parseDecode(*decodeAs, *printFmt)
	if err != nil {
		return err
	}
	if dec.itch && *printFmt == "" {
		return usageErr("--decode prints: add --print text or --print json")
	}
	fromNS, err := parseTimeFlag("--from-time", *fromTime)
	if err != nil {
		return err
	}
	toNS, err := parseTimeFlag("--to-time", *toTime)
	if err != nil {
		return err
	}
	j, err := journal.Open(*dir, journal.Config{ReadOnly: true})
	if err != nil {
		return fmt.Errorf("open journal %s: %w", *dir, err)
	}
	defer j.Close()
	id, err := pickStream(j, *session)
	if err != nil {
		return err
	}
	span := journal.Span{From: wire.Seq(*from), Last: wire.Seq(*to), FromTime: fromNS, ToTime: toNS}
	open := func() (replay.Source, error) {
		r, err := j.OpenSpan(id, span)
		if err != nil {
			return nil, err
		}
		return r, nil
	}
	pace := replay.Config{Speed: *speed, Rate: *rate, PPS: *pps, Mbps: *mbps, Max: *maxPace, Spin: *spin}
	if *printFmt != "" && len(paces) == 0 {
		pace.Max = true
	}
	if *spin == 0 {
		pace.Spin = -1
	}
	opts := replay.Options{Open: open, Loop: loop.forever, Passes: loop.n, ProgressEvery: *progress}
	for _, st := range j.Streams() {
		if st.ID == id { // what the progress line's ETA needs
			opts.Total, opts.LastTime = span.Extent(st)
		}
	}
	if *progress > 0 {
		opts.OnProgress = func(p replay.Progress) {
			eta := "?"
			if p.ETA >= 0 {
				eta = p.ETA.Round(time.Second).String()
			}
			fmt.Fprintf(os.Stderr, "mdbus replay: %d msgs, %.0f msgs/s, at seq %d (%s), pass %s, ETA %s\n",
				p.Messages, p.Rate, p.Last.Seq, time.Unix(0, p.Last.Time).UTC().Format(time.RFC3339Nano), loop.pass(p.Pass), eta)
		}
	}
	name := strings.TrimRight(string(id.Session[:]), " ")
	var pub *publisher.Publication
	var sent, sentBytes uint64                    // data packets the publishers sent, their bytes
	var cur atomic.Pointer[publisher.Publication] // pub, for the counters sampler
	ops, err := startOps("replay")
	if err != nil {
		return err
	}
	defer ops.Close()
	counters.AttachStruct(ops.Counters(), "replay", func() any {
		if p := cur.Load(); p != nil {
			return p.Stats() // this pass's publication
		}
		return publisher.Stats{}
	})
	if *printFmt != "" {
		out := bufio.NewWriterSize(stdout, 64<<10)
		defer out.Flush()
		var buf []byte
		opts.Emit = func(r journal.Record) error {
			buf = appendRecord(buf[:0], *printFmt, dec, name, r)
			_, err := out.Write(buf)
			return err
		}
	} else {
		group, source, err := gf.parse()
		if err != nil {
			return err
		}
		opts.PayloadSize = *payload
		if opts.PayloadSize == 0 {
			opts.PayloadSize = wire.DefaultPayloadSizeIPv4
			if group.Addr().Is6() {
				opts.PayloadSize = wire.DefaultPayloadSizeIPv6
			}
		}
		// The publisher of a pass is created before its first message is
		// paced (BeginPass), so that the first message leaves on time.
		opts.BeginPass = func(pass int, first journal.Record) error {
			pub, err = publisher.New(publisher.Config{Group: group, Interface: *gf.ifname, Source: source, TTL: *ttl,
				Session: name, FirstSeq: first.Seq, PayloadSize: *payload})
			if err != nil {
				return err
			}
			cur.Store(pub)
			if pass == 1 {
				each := ""
				if loop.forever || loop.n > 1 {
					each = ", each pass a new incarnation"
				}
				fmt.Fprintf(os.Stderr, "mdbus replay: session %s from sequence %d -> %s via %s (ttl %d%s)\n", name, first.Seq, group, *gf.ifname, *ttl, each)
			}
			return nil
		}
		var batch [][]byte
		opts.EmitPacket = func(recs []journal.Record) error {
			batch = batch[:0]
			for _, r := range recs {
				batch = append(batch, r.Data)
			}
			if _, err := pub.PublishBatch(batch); err != nil || pace.Max {
				return err
			}
			// Paced: the packet leaves now, alone, rather than with the
			// next one if the previous send is still in flight.
			if err := pub.Flush(ctx); err != nil && ctx.Err() == nil {
				return err
			}
			return nil // interrupted: the pacer stops cleanly before the next
		}
		opts.EndPass = func(int) error { // each pass ends its session; the next is a new incarnation
			if pub == nil {
				return nil
			}
			err := pub.Close()
			st := pub.Stats()
			sent, sentBytes = sent+st.Packets, sentBytes+st.Bytes
			pub = nil
			return err
		}
	}
	start := time.Now()
	pr, err := replay.Run(ctx, pace, opts)
	if pub != nil {
		err = errors.Join(err, pub.Close())
		st := pub.Stats()
		sent, sentBytes = sent+st.Packets, sentBytes+st.Bytes
	}
	if *printFmt == "" {
		// What crossed the wire: the publisher packs the messages of a
		// paced packet into one datagram (splitting it only beyond
		// --payload), and fills datagrams when it falls behind (--max).
		pr.Packets, pr.WireBytes = sent, sentBytes
	}
	el := pr.Elapsed
	if el <= 0 {
		el = time.Since(start)
	}
	secs := max(el.Seconds(), 1e-9)
	fmt.Fprintf(os.Stderr, "mdbus replay: %d messages in %d packets (%d message bytes, %d packet bytes) in %v: %.0f msgs/s, %.0f packets/s, %.3f Mbit/s; %d pass(es), last seq %d\n",
		pr.Messages, pr.Packets, pr.Bytes, pr.WireBytes, el.Round(time.Microsecond), float64(pr.Messages)/secs, float64(pr.Packets)/secs,
		float64(pr.WireBytes)*8/secs/1e6, pr.Pass, pr.Last.Seq)
	return err
}

// loopFlag is --loop: alone, until interrupted; with a count N, N passes
// (0: until interrupted, as tcpreplay's --loop=0).
type loopFlag struct {
	forever bool
	n       int
}

func (l *loopFlag) String() string {
	switch {
	case l == nil || !l.forever && l.n == 0:
		return ""
	case l.forever:
		return "0"
	}
	return strconv.Itoa(l.n)
}

func (l *loopFlag) Set(s string) error {
	switch s {
	case "true":
		l.forever, l.n = true, 0
		return nil
	case "false":
		l.forever, l.n = false, 0
		return nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 {
		return fmt.Errorf("want a number of passes (0 = until interrupted)")
	}
	l.forever, l.n = n == 0, n
	return nil
}

func (l *loopFlag) IsBoolFlag() bool { return true }

// pass formats a pass number as "2" or "2/5".
func (l *loopFlag) pass(p int) string {
	if l.n > 1 {
		return fmt.Sprintf("%d/%d", p, l.n)
	}
	return strconv.Itoa(p)
}

// joinLoopCount rewrites "--loop N" as "--loop=N": --loop is a flag that
// may stand alone, which the flag package reads only in the = form.
func joinLoopCount(args []string) []string {
	out := make([]string, 0, len(args))
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			return append(out, args[i:]...)
		}
		if (a == "--loop" || a == "-loop") && i+1 < len(args) {
			if _, err := strconv.ParseUint(args[i+1], 10, 31); err == nil {
				out = append(out, a+"="+args[i+1])
				i++
				continue
			}
		}
		out = append(out, a)
	}
	return out
}

// pickStream finds the newest incarnation of session, or of the only
// session in the journal.
func pickStream(j *journal.Journal, session string) (wire.StreamID, error) {
	if session != "" {
		s, err := wire.ParseSession(session)
		if err != nil {
			return wire.StreamID{}, usageErr("--session: %v", err)
		}
		id, ok := j.Latest(s, netip.AddrPort{})
		if !ok {
			return id, fmt.Errorf("session %q is not in the journal (mdbus journal list shows what is)", session)
		}
		return id, nil
	}
	var sessions []string
	var last wire.StreamID
	seen := map[wire.Session]bool{}
	for _, st := range j.Streams() {
		if !seen[st.ID.Session] {
			seen[st.ID.Session] = true
			sessions = append(sessions, strings.TrimRight(string(st.ID.Session[:]), " "))
		}
		last = st.ID
	}
	switch len(sessions) {
	case 0:
		return last, errors.New("the journal holds no streams")
	case 1:
		id, _ := j.Latest(last.Session, netip.AddrPort{})
		return id, nil
	}
	return last, usageErr("the journal holds several sessions (%s): choose one with --session", strings.Join(sessions, ", "))
}

// parseTimeFlag parses RFC 3339 or integer ns since the epoch; empty is 0.
func parseTimeFlag(name, v string) (int64, error) {
	if v == "" {
		return 0, nil
	}
	if ns, err := strconv.ParseInt(v, 10, 64); err == nil && ns > 0 {
		return ns, nil
	}
	t, err := time.Parse(time.RFC3339Nano, v)
	if err != nil {
		return 0, usageErr("%s %q: want a time like 2026-11-30T14:30:00Z (RFC 3339) or ns since the epoch", name, v)
	}
	return t.UnixNano(), nil
}

// appendRecord appends one record as a line of text, hex or JSON (session,
// seq, time_ns, time, len, then hex or the decoded "itch" object).
func appendRecord(b []byte, format string, dec decoder, session string, r journal.Record) []byte {
	switch format {
	case "json":
		b = append(b, `{"session":`...)
		b = appendJSONStr(b, session)
		b = append(b, `,"seq":`...)
		b = strconv.AppendUint(b, uint64(r.Seq), 10)
		b = append(b, `,"time_ns":`...)
		b = strconv.AppendInt(b, r.Time, 10)
		b = append(b, `,"time":"`...)
		b = time.Unix(0, r.Time).UTC().AppendFormat(b, time.RFC3339Nano)
		b = append(b, `","len":`...)
		b = strconv.AppendInt(b, int64(len(r.Data)), 10)
		b = dec.appendJSONField(b, r.Data, "hex")
		b = append(b, '}')
	default:
		b = append(b, session...)
		b = append(b, ' ')
		b = strconv.AppendUint(b, uint64(r.Seq), 10)
		b = append(b, ' ')
		b = time.Unix(0, r.Time).UTC().AppendFormat(b, time.RFC3339Nano)
		b = append(b, ' ')
		if format == "hex" {
			b = appendHex(b, r.Data)
		} else {
			b = dec.appendText(b, r.Data)
		}
	}
	return append(b, '\n')
}
