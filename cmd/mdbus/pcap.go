package main

import (
	"bufio"
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"net/netip"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/mdbus/mdbus/journal"
	"github.com/mdbus/mdbus/tools/pcap"
	"github.com/mdbus/mdbus/wire"
)

func init() {
	register("pcap", "import MoldUDP64 from pcap/pcapng captures (to a journal or live), export a journal as pcap", runPcap)
}

func runPcap(ctx context.Context, args []string, stdout io.Writer) error {
	if len(args) > 0 {
		switch args[0] {
		case "import":
			return runPcapImport(ctx, args[1:], stdout)
		case "export":
			return runPcapExport(ctx, args[1:], stdout)
		case "-h", "--help", "help":
			fmt.Fprint(stdout, pcapUsage)
			return nil
		}
	}
	fmt.Fprint(stdout, pcapUsage)
	return usageErr("want a subcommand: import or export")
}

const pcapUsage = `Usage:
  mdbus pcap import FILE... --journal DIR   journal each (source, session) stream of the captures
  mdbus pcap import FILE... --group ADDR    publish the captured packets live, at capture pace
  mdbus pcap export --journal DIR --out FILE [--session S] [--from X] [--to Y] [--group G]

Run "mdbus pcap import -h" or "mdbus pcap export -h" for the flags.
`

// parseInterleaved parses flags that may come before, between or after the
// positional arguments (FILE... --journal DIR), which flag.Parse alone stops
// at, and returns the positional ones.
func parseInterleaved(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := parseSome(fs, args); err != nil {
			return nil, err
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return pos, nil
		}
		if rest[0] == "--" {
			return append(pos, rest[1:]...), nil
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}

func runPcapImport(ctx context.Context, args []string, stdout io.Writer) error {
	fs := newFlags("pcap import", "FILE... (--journal DIR | --group ADDR) [flags]", `Reads MoldUDP64 downstream packets from pcap (micro- or nanosecond, either
byte order, optionally gzipped) and pcapng captures (several interfaces,
each with its own link type and timestamp resolution). Link types:
Ethernet (802.1Q / QinQ VLAN tags), Linux cooked SLL and SLL2, raw IP,
BSD loopback. IPv4 and IPv6 (extension headers), UDP, IP fragments
reassembled within bounds. Frames that are not MoldUDP64 over UDP are
skipped and counted by reason in the summary.

With --journal, each (source address, session) becomes a journal stream: a
sequence restart (back to 1) or data after an end of session starts a new
incarnation; messages the journal already holds are skipped, so importing
a capture twice adds nothing. Packets beyond a missing one wait (up to
--reorder per stream) for it to arrive late. The journal keeps every
incarnation contiguous, so a gap in the capture (messages it missed) is
reported and, with --gaps split (the default), what follows it becomes a
new incarnation; --gaps fail stops at the first gap instead. A packet
repeated byte for byte (a SPAN port, a second tap) is a duplicate, not a
restart. At most --max-streams incarnations are created; data beyond is
refused and counted. Several captures are read in the order of their first
packet's time, whatever their order on the command line. Messages skipped
as late (a capture overlapping another in time) or refused make the
command exit 1 after its summary.

With --group, the captured packets are sent verbatim (session and
sequences preserved) to the group from one plain UDP socket, paced by
their capture times (--speed, or --max for as fast as possible), on --interface (default lo) with --ttl
(default 0: the packets stay on this host).`)
	jdir := fs.String("journal", "", "journal directory to import into")
	group := fs.String("group", "", "send the packets live to this group:port instead of journaling")
	ports := fs.String("port", "", "keep only packets to these UDP destination ports (comma-separated)")
	dsts := fs.String("dst", "", "keep only packets to these destination addresses or address:ports (comma-separated)")
	gaps := fs.String("gaps", "split", "on a gap in a stream: split (new incarnation after it) or fail")
	noFrag := fs.Bool("no-reassembly", false, "count IP fragments as skipped instead of reassembling them")
	reorder := countFlag(fs, "reorder", 64, "packets a stream holds beyond a missing one, waiting for it to arrive late (0 = none)")
	speed := rateFlag(fs, "speed", 1, "--group pacing: 1 = capture pace, 2 = twice as fast, 0.5 = half speed (positive)")
	maxPace := fs.Bool("max", false, "--group: send as fast as possible")
	maxStreams := countFlag(fs, "max-streams", pcap.DefaultMaxStreams, "most journal incarnations (streams) one import creates; data beyond is refused and counted (0 = no limit)")
	ifname := fs.String("interface", "lo", "--group: interface multicast leaves through")
	ttl := fs.Int("ttl", 0, "--group: multicast TTL; 0 keeps packets on this host")
	fs.Bool("netns", false, "run inside a private user+network namespace")
	files, err := parseInterleaved(fs, args)
	if err != nil {
		return err
	}
	if len(files) == 0 {
		return usageErr("no capture FILE given")
	}
	if (*jdir == "") == (*group == "") {
		return usageErr("give exactly one of --journal DIR (import into a journal) or --group ADDR (publish live)")
	}
	cfg := pcap.Config{Reassembly: pcap.Reassembly{Off: *noFrag}}
	if cfg.Ports, err = parsePorts(*ports); err != nil {
		return err
	}
	if *dsts != "" {
		for _, d := range strings.Split(*dsts, ",") {
			if ap, err := netip.ParseAddrPort(d); err == nil {
				cfg.Dsts = append(cfg.Dsts, ap.Addr())
				cfg.Ports = append(cfg.Ports, ap.Port())
				continue
			}
			a, err := netip.ParseAddr(d)
			if err != nil {
				return usageErr("--dst %q: want an address or address:port", d)
			}
			cfg.Dsts = append(cfg.Dsts, a)
		}
	}
	if *group != "" {
		g, err := netip.ParseAddrPort(*group)
		if err != nil {
			return usageErr("--group %q: want a group:port, like 239.192.0.1:31001 or [ff15::1]:31001", *group)
		}
		switch {
		case *maxPace && flagWasSet(fs, "speed"):
			return usageErr("give --speed or --max, not both")
		case !(*speed > 0) || math.IsInf(*speed, 0):
			return usageErr("--speed %v: want a positive factor like 0.5, 1 or 10 (--max sends as fast as possible)", *speed)
		}
		sp := *speed
		if *maxPace {
			sp = -1
		}
		if files, err = orderByTime(files, cfg, stdout); err != nil {
			return err
		}
		return pcapSend(ctx, files, cfg, pcap.SendConfig{Group: g, Interface: *ifname, TTL: *ttl, Speed: sp}, stdout)
	}
	icfg := pcap.ImportConfig{Reorder: *reorder, MaxStreams: *maxStreams}
	if *reorder < 0 {
		return usageErr("--reorder must not be negative")
	}
	if *maxStreams < 0 {
		return usageErr("--max-streams %d: want a count, 0 for no limit", *maxStreams)
	}
	if *maxStreams == 0 {
		icfg.MaxStreams = -1
	}
	if files, err = orderByTime(files, cfg, stdout); err != nil {
		return err
	}
	if *reorder == 0 {
		icfg.Reorder = -1
	}
	switch *gaps {
	case "split":
		icfg.Gaps = pcap.GapSplit
	case "fail":
		icfg.Gaps = pcap.GapFail
	default:
		return usageErr("--gaps %q: want split or fail", *gaps)
	}
	j, err := journal.Open(*jdir, journal.Config{Sync: journal.SyncNone})
	if err != nil {
		return err
	}
	im := pcap.NewImporter(j, icfg)
	total, ierr := eachCapture(files, func(f string) (pcap.Stats, error) { return importFile(ctx, im, f, cfg) })
	cerr := im.Close()
	// The summary reports what was done even when an error stopped it.
	printReadStats(stdout, len(files), total)
	printImportStats(stdout, im.Stats())
	if jerr := j.Close(); cerr == nil {
		cerr = jerr
	}
	if ierr != nil {
		return ierr
	}
	if cerr != nil {
		return cerr
	}
	return skipped(im.Stats(), *maxStreams)
}

// skipped is the error of an import that left captured messages out of
// the journal: the summary has been printed; the exit status says so.
func skipped(st pcap.ImportStats, maxStreams int) error {
	var why []string
	if st.Late > 0 {
		why = append(why, fmt.Sprintf("%d messages skipped as late (captured after a later packet had split their stream at a gap: captures that overlap in time, or reordering beyond --reorder)", st.Late))
	}
	if st.RefusedStreams > 0 {
		why = append(why, fmt.Sprintf("%d incarnations (%d messages) refused beyond --max-streams %d", st.RefusedStreams, st.Refused, maxStreams))
	}
	if len(why) == 0 {
		return nil
	}
	return fmt.Errorf("pcap import: %s", strings.Join(why, "; "))
}

// orderByTime returns files sorted by the time of their first MoldUDP64
// packet (files without one keep their place at the end), saying so when
// that differs from the order given.
func orderByTime(files []string, cfg pcap.Config, stdout io.Writer) ([]string, error) {
	if len(files) < 2 {
		return files, nil
	}
	type timed struct {
		name string
		ts   int64
		ok   bool
	}
	ts := make([]timed, len(files))
	for i, name := range files {
		f, err := os.Open(name)
		if err != nil {
			return nil, err
		}
		c := cfg
		c.Name = name
		t, ok, err := pcap.FirstTime(bufio.NewReader(f), c)
		f.Close()
		if err != nil {
			return nil, err
		}
		ts[i] = timed{name, t, ok}
	}
	slices.SortStableFunc(ts, func(a, b timed) int {
		switch {
		case a.ok != b.ok:
			if a.ok {
				return -1
			}
			return 1
		case !a.ok:
			return 0
		}
		return cmp.Compare(a.ts, b.ts)
	})
	out := make([]string, len(ts))
	for i, t := range ts {
		out[i] = t.name
	}
	if !slices.Equal(out, files) {
		fmt.Fprintf(stdout, "reading the captures in the order of their first packet's time: %s\n", strings.Join(out, " "))
	}
	return out, nil
}

func importFile(ctx context.Context, im *pcap.Importer, name string, cfg pcap.Config) (pcap.Stats, error) {
	f, err := os.Open(name)
	if err != nil {
		return pcap.Stats{}, err
	}
	defer f.Close()
	cfg.Name = name
	return im.ImportFile(&ctxReader{ctx: ctx, r: bufio.NewReaderSize(f, 1<<20)}, cfg)
}

// ctxReader stops a long import when ctx ends (SIGINT).
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c *ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, fmt.Errorf("interrupted: %w", err)
	}
	return c.r.Read(p)
}

// eachCapture runs do on each file in turn and sums their stats; it stops
// at the first error and returns it with the sums so far.
func eachCapture(files []string, do func(file string) (pcap.Stats, error)) (pcap.Stats, error) {
	var total pcap.Stats
	for _, f := range files {
		st, err := do(f)
		total.Add(st)
		if err != nil {
			return total, err
		}
	}
	return total, nil
}

func pcapSend(ctx context.Context, files []string, cfg pcap.Config, scfg pcap.SendConfig, stdout io.Writer) error {
	s, err := pcap.NewSender(scfg)
	if err != nil {
		return err
	}
	defer s.Close()
	start := time.Now()
	total, serr := eachCapture(files, func(f string) (pcap.Stats, error) { return sendFile(ctx, s, f, cfg) })
	printReadStats(stdout, len(files), total)
	fmt.Fprintf(stdout, "sent %d packets to %s in %v\n", s.Sent(), scfg.Group, time.Since(start).Round(time.Millisecond))
	if errors.Is(serr, context.Canceled) {
		return nil // SIGINT: a clean stop, summary printed
	}
	return serr
}

func sendFile(ctx context.Context, s *pcap.Sender, name string, cfg pcap.Config) (pcap.Stats, error) {
	f, err := os.Open(name)
	if err != nil {
		return pcap.Stats{}, err
	}
	defer f.Close()
	cfg.Name = name
	r, err := pcap.NewReader(bufio.NewReaderSize(f, 1<<20), cfg)
	if err != nil {
		return pcap.Stats{}, err
	}
	for {
		ev, err := r.Next()
		if err != nil {
			if errors.Is(err, io.EOF) {
				return r.Stats(), nil
			}
			return r.Stats(), err
		}
		if err := s.Send(ctx, ev); err != nil {
			return r.Stats(), err
		}
	}
}

func printReadStats(w io.Writer, files int, st pcap.Stats) {
	fmt.Fprintf(w, "read %d file(s): %d frames, %d MoldUDP64 packets, %d skipped\n", files, st.Frames, st.Events, st.SkippedTotal())
	for r := pcap.Reason(0); r < pcap.NumReasons; r++ {
		if n := st.Skip(r); n > 0 {
			fmt.Fprintf(w, "  skipped %-18s %d\n", r.String()+":", n)
		}
	}
	if st.Truncated > 0 || st.Reassembled > 0 || st.ReassemblyDropped > 0 {
		fmt.Fprintf(w, "  truncated frames %d, reassembled datagrams %d, datagrams given up %d\n", st.Truncated, st.Reassembled, st.ReassemblyDropped)
	}
}

// maxImportStreamLines bounds the per-stream lines of the import summary.
const maxImportStreamLines = 100

func printImportStats(w io.Writer, st pcap.ImportStats) {
	fmt.Fprintf(w, "journal: %d messages appended, %d already held, %d duplicates, %d late; %d heartbeats, %d ends of session, %d ignored (no data yet)\n",
		st.Appended, st.Held, st.Duplicates, st.Late, st.Heartbeats, st.Ends, st.Orphans)
	if st.RefusedStreams > 0 {
		fmt.Fprintf(w, "refused: %d incarnations (%d messages) beyond --max-streams\n", st.RefusedStreams, st.Refused)
	}
	for i, s := range st.Streams {
		if i == maxImportStreamLines {
			fmt.Fprintf(w, "  ... %d more streams (mdbus journal list shows them all)\n", len(st.Streams)-i)
			break
		}
		how := "continued"
		if s.Created {
			how = "new"
		}
		end := ""
		if s.Ended {
			end = ", ended"
		}
		last := "-"
		if s.Next > s.First {
			last = strconv.FormatUint(uint64(s.Next-1), 10)
		}
		fmt.Fprintf(w, "  %s (%s): sequences %d..%s, %d appended, %d held%s\n", s.ID, how, s.First, last, s.Appended, s.Held, end)
	}
	if st.GapCount > 0 {
		fmt.Fprintf(w, "gaps: %d (each split its stream into a new incarnation)\n", st.GapCount)
		for _, g := range st.Gaps {
			fmt.Fprintf(w, "  %s\n", g)
		}
		if uint64(len(st.Gaps)) < st.GapCount {
			fmt.Fprintf(w, "  ... %d more\n", st.GapCount-uint64(len(st.Gaps)))
		}
	}
}

func parsePorts(s string) ([]uint16, error) {
	if s == "" {
		return nil, nil
	}
	var out []uint16
	for _, p := range strings.Split(s, ",") {
		n, err := strconv.ParseUint(strings.TrimSpace(p), 10, 16)
		if err != nil || n == 0 {
			return nil, usageErr("--port %q: want UDP ports 1-65535, comma-separated", s)
		}
		out = append(out, uint16(n))
	}
	return out, nil
}

func runPcapExport(_ context.Context, args []string, stdout io.Writer) error {
	fs := newFlags("pcap export", "--journal DIR --out FILE [flags]", `Writes journal streams as a nanosecond pcap of Ethernet/IPv4/UDP frames
(IPv6 when --group is IPv6), checksums valid, that Wireshark and tshark
decode with "-d udp.port==PORT,moldudp64". Records are packed into
MoldUDP64 packets of at most --payload bytes, grouped as they were on the
wire when the journal recorded it (mdbus record, rewind --journal, pub
--journal); records without that mark (older journals) share a packet when
they share a timestamp. --coalesce repacks instead. Each packet carries its
first record's time. An ended
stream exported to its end gets its end-of-session packet.

The selected streams (--session, --source, --incarnation; default all)
are merged in packet time order, as they were on the wire.`)
	jdir := fs.String("journal", "", "journal directory (required)")
	out := fs.String("out", "", "pcap file to write (required; - for stdout)")
	session := fs.String("session", "", "export only this session")
	source := fs.String("source", "", "export only streams from this source address:port")
	inc := fs.Uint("incarnation", 0, "export only this incarnation (default all)")
	from := fs.String("from", "", "first sequence number, or an RFC 3339 time (inclusive)")
	to := fs.String("to", "", "last sequence number (inclusive), or an RFC 3339 time (exclusive)")
	group := fs.String("group", pcap.DefaultExportGroup.String(), "destination group[:port] of the packets")
	port := fs.Uint("port", 0, "destination UDP port (overrides the group's)")
	payload := fs.Int("payload", 0, "largest MoldUDP64 packet, bytes (default 1472 IPv4, 1452 IPv6)")
	coalesce := fs.Duration("coalesce", 0, "repack: records up to this far apart in time share a packet (0 = keep the recorded packets; negative = fill every packet)")
	fs.Bool("netns", false, "run inside a private user+network namespace")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageErr("unexpected argument %q", fs.Arg(0))
	}
	if *jdir == "" || *out == "" {
		return usageErr("--journal DIR and --out FILE are required")
	}
	var cfg pcap.ExportConfig
	g, err := netip.ParseAddrPort(*group)
	if err != nil {
		a, aerr := netip.ParseAddr(*group)
		if aerr != nil {
			return usageErr("--group %q: want an address or address:port", *group)
		}
		g = netip.AddrPortFrom(a, pcap.DefaultExportGroup.Port())
	}
	if *port > 65535 {
		return usageErr("--port %d: want 1-65535", *port)
	}
	if *port != 0 {
		g = netip.AddrPortFrom(g.Addr(), uint16(*port))
	}
	cfg.Group, cfg.PayloadSize, cfg.Coalesce = g, *payload, *coalesce
	if cfg.From, cfg.FromTime, err = parseBound("--from", *from); err != nil {
		return err
	}
	if cfg.To, cfg.ToTime, err = parseBound("--to", *to); err != nil {
		return err
	}
	var sess wire.Session
	if *session != "" {
		if sess, err = wire.ParseSession(*session); err != nil {
			return usageErr("--session: %v", err)
		}
	}
	var src netip.AddrPort
	if *source != "" {
		if src, err = netip.ParseAddrPort(*source); err != nil {
			return usageErr("--source %q: want address:port", *source)
		}
	}
	if _, err := os.Stat(*jdir); err != nil {
		return fmt.Errorf("journal %s: %w", *jdir, err)
	}
	j, err := journal.Open(*jdir, journal.Config{ReadOnly: true})
	if err != nil {
		return err
	}
	defer j.Close()
	var ids []wire.StreamID
	for _, in := range j.Streams() {
		if (*session == "" || in.ID.Session == sess) && (!src.IsValid() || in.ID.Source == src) && (*inc == 0 || in.ID.Incarnation == uint32(*inc)) {
			ids = append(ids, in.ID)
		}
	}
	if len(ids) == 0 {
		return fmt.Errorf("journal %s: no stream matches (mdbus journal list shows what it holds)", *jdir)
	}
	var f *os.File
	if *out == "-" {
		f = os.Stdout
	} else if f, err = os.Create(*out); err != nil {
		return err
	}
	bw := bufio.NewWriterSize(f, 1<<20)
	w, err := pcap.NewWriter(bw)
	if err != nil {
		f.Close()
		return err
	}
	sts, err := pcap.ExportStreams(w, j, ids, cfg)
	if err != nil {
		f.Close()
		return err
	}
	var pkts, msgs uint64
	for i, st := range sts {
		pkts, msgs = pkts+st.Packets, msgs+st.Messages
		if *out != "-" {
			end := ""
			if st.End {
				end = " + end of session"
			}
			fmt.Fprintf(stdout, "  %s: %d messages (%d..%d) in %d packets%s\n", ids[i], st.Messages, st.First, st.Last, st.Packets, end)
		}
	}
	if err := bw.Flush(); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", *out, err)
	}
	if *out != "-" {
		if err := f.Close(); err != nil {
			return fmt.Errorf("write %s: %w", *out, err)
		}
		fmt.Fprintf(stdout, "wrote %s: %d packets, %d messages to %s (tshark -r %s -d udp.port==%d,moldudp64)\n", *out, pkts, msgs, g, *out, g.Port())
	}
	return nil
}

// parseBound parses --from/--to: a sequence number or an RFC 3339 time.
func parseBound(name, s string) (wire.Seq, int64, error) {
	if s == "" {
		return 0, 0, nil
	}
	if n, err := strconv.ParseUint(s, 10, 64); err == nil {
		if n == 0 {
			return 0, 0, usageErr("%s 0: sequences start at 1", name)
		}
		return wire.Seq(n), 0, nil
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return 0, 0, usageErr("%s %q: want a sequence number or an RFC 3339 time like 2026-11-30T14:30:00Z", name, s)
	}
	return 0, t.UnixNano(), nil
}
