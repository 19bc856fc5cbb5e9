package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
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
drift accumulates), at --speed F, at --rate N msgs/s or as fast as possible
(--max), once or with --loop (each pass a new publisher incarnation). With
--print it writes the messages to stdout instead (as fast as possible unless
--speed or --rate is given). A progress line goes to stderr every
--progress; Ctrl-C stops cleanly with a summary.`)
	gf := addGroupFlags(fs)
	ttl := fs.Int("ttl", 0, "multicast TTL / hop limit; 0 keeps packets on this host")
	dir := fs.String("journal", "", "journal directory (required)")
	session := fs.String("session", "", "session to replay (default: the only session in the journal); its newest incarnation")
	from := fs.Uint64("from", 0, "first sequence to replay (default: the first held)")
	fromTime := fs.String("from-time", "", "start at the first message stamped at or after this time (RFC 3339, or ns since the epoch)")
	to := fs.Uint64("to", 0, "last sequence to replay, inclusive (default: the last held)")
	toTime := fs.String("to-time", "", "stop before the first message stamped after this time (RFC 3339, or ns since the epoch)")
	speed := rateFlag(fs, "speed", 1, "pace factor: 2 replays twice as fast, 0.5 at half speed")
	rate := rateFlag(fs, "rate", 0, "fixed rate in messages/s instead of the recorded pace, like 500 or 10k")
	maxPace := fs.Bool("max", false, "as fast as possible")
	loop := fs.Bool("loop", false, "replay the range again and again until interrupted")
	printFmt := fs.String("print", "", "print to stdout instead of publishing: text, hex or json")
	decodeAs := addDecodeFlag(fs)
	progress := fs.Duration("progress", time.Second, "progress line interval on stderr (0 = none)")
	payload := fs.Int("payload", 0, "max UDP payload bytes per packet (default fits a 1500-byte MTU)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	speedSet, rateSet := false, false
	fs.Visit(func(f *flag.Flag) {
		speedSet = speedSet || f.Name == "speed"
		rateSet = rateSet || f.Name == "rate"
	})
	switch {
	case speedSet && rateSet || speedSet && *maxPace || rateSet && *maxPace:
		return usageErr("give one pace: --speed, --rate or --max")
	case *dir == "":
		return usageErr("--journal DIR is required")
	case *speed <= 0:
		return usageErr("--speed %v: want a positive factor like 0.5, 1 or 10", *speed)
	case *rate < 0 || *progress < 0:
		return usageErr("--rate and --progress must not be negative")
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
	rng := recordRange{j: j, id: id, from: wire.Seq(*from), fromNS: fromNS, to: wire.Seq(*to), toNS: toNS}
	pace := replay.Config{Speed: *speed, Rate: *rate, Max: *maxPace}
	if *printFmt != "" && !speedSet && !rateSet {
		pace.Max = true
	}
	opts := replay.Options{Open: rng.open, Loop: *loop, ProgressEvery: *progress}
	for _, st := range j.Streams() {
		if st.ID != id || st.Next <= st.First {
			continue
		}
		// What the progress line's ETA needs: the range's size, or the
		// time of its last record.
		first, last := max(st.First, rng.from), st.Next-1
		if rng.to != 0 {
			last = min(last, rng.to)
		}
		if fromNS == 0 && toNS == 0 && last >= first {
			opts.Total = uint64(last-first) + 1
		}
		if rng.to == 0 {
			opts.LastTime = st.LastTime
			if toNS != 0 {
				opts.LastTime = min(toNS, st.LastTime)
			}
		}
	}
	if *progress > 0 {
		opts.OnProgress = func(p replay.Progress) {
			eta := "?"
			if p.ETA >= 0 {
				eta = p.ETA.Round(time.Second).String()
			}
			fmt.Fprintf(os.Stderr, "mdbus replay: %d msgs, %.0f msgs/s, at seq %d (%s), pass %d, ETA %s\n",
				p.Messages, p.Rate, p.Last.Seq, time.Unix(0, p.Last.Time).UTC().Format(time.RFC3339Nano), p.Pass, eta)
		}
	}
	name := strings.TrimRight(string(id.Session[:]), " ")
	var pub *publisher.Publication
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
		opts.Emit = func(r journal.Record) error {
			if pub == nil {
				pub, err = publisher.New(publisher.Config{Group: group, Interface: *gf.ifname, Source: source, TTL: *ttl,
					Session: name, FirstSeq: r.Seq, PayloadSize: *payload})
				if err != nil {
					return err
				}
				cur.Store(pub)
				fmt.Fprintf(os.Stderr, "mdbus replay: session %s from sequence %d -> %s via %s (ttl %d)\n", name, r.Seq, group, *gf.ifname, *ttl)
			}
			_, err := pub.Publish(r.Data)
			return err
		}
		opts.EndPass = func(int) error { // each pass ends its session; the next is a new incarnation
			if pub == nil {
				return nil
			}
			err := pub.Close()
			pub = nil
			return err
		}
	}
	start := time.Now()
	pr, err := replay.Run(ctx, pace, opts)
	if pub != nil {
		err = errors.Join(err, pub.Close())
	}
	el := time.Since(start)
	fmt.Fprintf(os.Stderr, "mdbus replay: %d messages (%d bytes) in %v, %.0f msgs/s, %d pass(es), last seq %d\n",
		pr.Messages, pr.Bytes, el.Round(time.Millisecond), float64(pr.Messages)/el.Seconds(), pr.Pass, pr.Last.Seq)
	return err
}

// pickStream finds the newest incarnation of session, or of the only
// session in the journal.
func pickStream(j *journal.Journal, session string) (journal.StreamID, error) {
	if session != "" {
		s, err := wire.ParseSession(session)
		if err != nil {
			return journal.StreamID{}, usageErr("--session: %v", err)
		}
		id, ok := j.Latest(s, netip.AddrPort{})
		if !ok {
			return id, fmt.Errorf("session %q is not in the journal (mdbus journal list shows what is)", session)
		}
		return id, nil
	}
	var sessions []string
	var last journal.StreamID
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

// recordRange opens a reader limited to the chosen range.
type recordRange struct {
	j        *journal.Journal
	id       journal.StreamID
	from, to wire.Seq // to inclusive; 0 = unbounded
	fromNS   int64
	toNS     int64
}

func (r recordRange) open() (replay.Source, error) {
	rd, err := r.j.OpenReader(r.id)
	if err != nil {
		return nil, err
	}
	switch {
	case r.from != 0:
		err = rd.SeekSeq(r.from)
	case r.fromNS != 0:
		err = rd.SeekTime(r.fromNS)
	}
	if err != nil {
		rd.Close()
		return nil, fmt.Errorf("seek: %w", err)
	}
	return &rangeSource{rd: rd, to: r.to, toNS: r.toNS}, nil
}

type rangeSource struct {
	rd   *journal.Reader
	to   wire.Seq
	toNS int64
}

func (s *rangeSource) Next() (journal.Record, error) {
	rec, err := s.rd.Next()
	if err != nil {
		return rec, err
	}
	if s.to != 0 && rec.Seq > s.to || s.toNS != 0 && rec.Time > s.toNS {
		return journal.Record{}, io.EOF
	}
	return rec, nil
}

func (s *rangeSource) Close() error { return s.rd.Close() }

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
