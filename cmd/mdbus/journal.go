package main

import (
	"bufio"
	"context"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math"
	"strconv"
	"time"

	"github.com/mdbus/mdbus/fetch"
	"github.com/mdbus/mdbus/journal"
	"github.com/mdbus/mdbus/tools/itch"
	"github.com/mdbus/mdbus/wire"
)

func init() {
	register("journal", "inspect and maintain a journal: list, verify, dump, compact, repair", runJournal)
}

const journalUsage = `Usage: mdbus journal list|verify|dump|compact|repair [flags] DIR

  list     streams, their segments, sequence and time ranges, sizes, compression
  verify   read every record (CRC and sequence checks); exit 1 on corruption,
           naming the segment file and byte offset
  dump     print records as text, hex or JSON lines (--format); --decode itch50
           decodes NASDAQ ITCH 5.0 field by field
  compact  zstd-compress every sealed segment not compressed yet
  repair   rewrite corrupt segments, fetching the damaged ranges from a
           retransmitter or rewinder (--from ADDR) instead of cutting them

Run "mdbus journal SUBCOMMAND -h" for its flags.
`

func runJournal(ctx context.Context, args []string, stdout io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stdout, journalUsage)
		return usageErr("a subcommand is required")
	}
	switch args[0] {
	case "list":
		return journalList(args[1:], stdout)
	case "verify":
		return journalVerify(args[1:], stdout)
	case "dump":
		return journalDump(args[1:], stdout)
	case "compact":
		return journalCompact(args[1:], stdout)
	case "repair":
		return journalRepair(ctx, args[1:], stdout)
	case "-h", "--help", "help":
		fmt.Fprint(stdout, journalUsage)
		return nil
	}
	return usageErr("unknown journal subcommand %q (want list, verify, dump, compact or repair)", args[0])
}

// journalFlags parses the flags every subcommand shares and the DIR.
type journalFlags struct {
	session *string
}

func parseJournalArgs(name, about string, args []string, extra func(fs *flag.FlagSet)) (string, journalFlags, error) {
	fs := newFlags("journal "+name, "[flags] DIR", about)
	jf := journalFlags{session: fs.String("session", "", "only streams of this session")}
	fs.Bool("netns", false, "run inside a private user+network namespace")
	if extra != nil {
		extra(fs)
	}
	pos, err := parseInterleaved(fs, args) // flags may follow DIR
	if err != nil {
		return "", jf, err
	}
	if len(pos) != 1 {
		return "", jf, usageErr("want exactly one journal directory, got %d arguments %q", len(pos), pos)
	}
	return pos[0], jf, nil
}

// openStreams opens the journal in dir read-only and lists the streams
// the flags select; the caller closes the journal.
func (jf journalFlags) openStreams(dir string) (*journal.Journal, []journal.StreamInfo, error) {
	j, err := journal.Open(dir, journal.Config{ReadOnly: true})
	if err != nil {
		return nil, nil, err
	}
	infos, err := jf.streams(j)
	if err != nil {
		j.Close()
		return nil, nil, err
	}
	return j, infos, nil
}

func (jf journalFlags) streams(j *journal.Journal) ([]journal.StreamInfo, error) {
	all := j.Streams()
	if *jf.session == "" {
		return all, nil
	}
	s, err := wire.ParseSession(*jf.session)
	if err != nil {
		return nil, usageErr("--session: %v", err)
	}
	var out []journal.StreamInfo
	for _, in := range all {
		if in.ID.Session == s {
			out = append(out, in)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no stream of session %q in %s", *jf.session, j.Dir())
	}
	return out, nil
}

func fmtTime(ns int64) string {
	if ns == 0 {
		return "-"
	}
	return time.Unix(0, ns).UTC().Format("2006-01-02T15:04:05.000000000Z")
}

func journalList(args []string, stdout io.Writer) error {
	dir, jf, err := parseJournalArgs("list", "Lists the streams of a journal and their segments.", args, nil)
	if err != nil {
		return err
	}
	j, infos, err := jf.openStreams(dir)
	if err != nil {
		return err
	}
	defer j.Close()
	w := bufio.NewWriter(stdout)
	defer w.Flush()
	for _, in := range infos {
		ended := ""
		if in.Ended {
			ended = ", ended"
		}
		fmt.Fprintf(w, "stream %s: seq [%d, %d) %d messages, time %s .. %s, %d segments (%d compressed), %d bytes%s\n",
			in.ID, in.First, in.Next, in.Next-in.First, fmtTime(in.FirstTime), fmtTime(in.LastTime),
			in.Segments, in.Compressed, in.Bytes, ended)
		segs, err := j.Segments(in.ID)
		if err != nil {
			return err
		}
		for _, s := range segs {
			kind := "plain"
			if s.Compressed {
				kind = "zstd"
			}
			if s.Newest {
				kind += ", newest"
			}
			fmt.Fprintf(w, "  %s  seq [%d, %d)  %d bytes  %s\n", s.Path, s.First, s.Next, s.Bytes, kind)
		}
	}
	for _, t := range j.TornTails() {
		fmt.Fprintf(w, "torn tail: %s from offset %d (%d bytes), cut at the next read-write open\n", t.Path, t.Offset, t.Bytes)
	}
	for _, d := range j.Damage() {
		fmt.Fprintf(w, "DAMAGED %s (mdbus journal verify for all of it)\n", d)
	}
	return nil
}

func journalVerify(args []string, stdout io.Writer) error {
	dir, jf, err := parseJournalArgs("verify", `Reads every record of every segment, checking lengths, CRC-32C and sequence
continuity within and across segments, and the layout: every stream
directory and segment missing, empty, renamed, linked (a symbolic link,
FIFO or device in place of a file, refused without following or blocking)
or unparsable, and every run of sequences missing between segments. Exits
1 when anything is wrong, naming the file (and byte offset) of each
problem. Does not modify the journal (a torn tail is reported, not cut).`, args, nil)
	if err != nil {
		return err
	}
	j, infos, err := jf.openStreams(dir)
	if err != nil {
		return err
	}
	defer j.Close()
	var first *journal.CorruptError
	nbad := 0
	for _, in := range infos {
		bad, err := j.Verify(in.ID)
		if err != nil {
			return err
		}
		if len(bad) == 0 {
			fmt.Fprintf(stdout, "ok      %s: seq [%d, %d), %d segments\n", in.ID, in.First, in.Next, in.Segments)
			continue
		}
		for _, ce := range bad {
			fmt.Fprintf(stdout, "CORRUPT %s: %s at offset %d: %s\n", in.ID, ce.Path, ce.Offset, ce.Reason)
			if first == nil {
				first = ce
			}
			nbad++
		}
	}
	for _, t := range j.TornTails() {
		fmt.Fprintf(stdout, "torn tail %s from offset %d (%d bytes): not corruption; cut at the next read-write open\n", t.Path, t.Offset, t.Bytes)
	}
	damaged := j.Damage()
	for _, d := range damaged {
		fmt.Fprintf(stdout, "DAMAGED %s\n", d)
	}
	if len(damaged) > 0 {
		msg := fmt.Sprintf("%d damaged stream director(ies) or segment(s), the first %s", len(damaged), damaged[0])
		if first != nil {
			msg += fmt.Sprintf(", and %d corrupt segment(s)", nbad)
		}
		return fmt.Errorf("%s; restore the files from a backup, or re-record the missing ranges", msg)
	}
	if first != nil {
		return fmt.Errorf("%d corrupt segment(s), the first %s at offset %d; restore them with: mdbus journal repair --from ADDR %s",
			nbad, first.Path, first.Offset, dir)
	}
	return nil
}

func journalDump(args []string, stdout io.Writer) error {
	var format, from, count, decodeAs *string
	dir, jf, err := parseJournalArgs("dump", `Prints records, one per line: text (sequence, time, length, quoted bytes),
hex, or json (one object per line: session, source, incarnation, seq,
time_ns, len, data_hex).`, args, func(fs *flag.FlagSet) {
		format = fs.String("format", "text", "text, hex or json")
		decodeAs = addDecodeFlag(fs)
		from = fs.String("from", "", "first sequence (default: the stream's first)")
		count = fs.String("count", "", "at most this many records per stream (default: all)")
	})
	if err != nil {
		return err
	}
	dec, err := parseOutput(*format, *decodeAs)
	if err != nil {
		return err
	}
	var fromSeq wire.Seq
	if *from != "" {
		n, err := strconv.ParseUint(*from, 10, 64)
		if err != nil || n == 0 {
			return usageErr("--from %q: want a sequence number from 1", *from)
		}
		fromSeq = wire.Seq(n)
	}
	limit := int64(-1)
	if *count != "" {
		n, err := parseNumber(*count)
		if err != nil || n != math.Trunc(n) || n >= math.MaxInt64 {
			return usageErr("--count %q: want a count from 0, like 100 or 10k", *count)
		}
		limit = int64(n)
	}
	j, infos, err := jf.openStreams(dir)
	if err != nil {
		return err
	}
	defer j.Close()
	w := bufio.NewWriterSize(stdout, 1<<16)
	defer w.Flush()
	enc := json.NewEncoder(w)
	var line []byte
	for _, in := range infos {
		r, err := j.OpenReader(in.ID)
		if err != nil {
			return err
		}
		if fromSeq != 0 {
			if err := r.SeekSeq(fromSeq); err != nil {
				r.Close()
				return err
			}
		}
		if *format != "json" {
			fmt.Fprintf(w, "# stream %s\n", in.ID)
		}
		for n := int64(0); limit < 0 || n < limit; n++ {
			rec, err := r.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				r.Close()
				return err
			}
			switch *format {
			case "text":
				if dec.itch {
					line = fmt.Appendf(line[:0], "%d %s %d ", rec.Seq, fmtTime(rec.Time), len(rec.Data))
					line = append(dec.appendText(line, rec.Data), '\n')
					w.Write(line)
					break
				}
				fmt.Fprintf(w, "%d %s %d %q\n", rec.Seq, fmtTime(rec.Time), len(rec.Data), rec.Data)
			case "hex":
				fmt.Fprintf(w, "%d %s %d %s\n", rec.Seq, fmtTime(rec.Time), len(rec.Data), hex.EncodeToString(rec.Data))
			case "json":
				src := ""
				if in.ID.Source.IsValid() {
					src = in.ID.Source.String()
				}
				data, decoded := hex.EncodeToString(rec.Data), json.RawMessage(nil)
				if dec.itch {
					data, decoded = "", itch.AppendJSON(line[:0], rec.Data)
				}
				_ = enc.Encode(struct {
					Session     string          `json:"session"`
					Source      string          `json:"source,omitempty"`
					Incarnation uint32          `json:"incarnation"`
					Seq         uint64          `json:"seq"`
					TimeNS      int64           `json:"time_ns"`
					Len         int             `json:"len"`
					Data        string          `json:"data_hex,omitempty"`
					ITCH        json.RawMessage `json:"itch,omitempty"`
				}{in.ID.Session.String(), src, in.ID.Incarnation, uint64(rec.Seq), rec.Time, len(rec.Data), data, decoded})
			}
		}
		r.Close()
	}
	return nil
}

func journalCompact(args []string, stdout io.Writer) error {
	dir, _, err := parseJournalArgs("compact", `Compresses every sealed segment (every segment but a stream's newest, and
the newest too once its session ended) with zstd, in independently
decodable blocks. Safe to run beside readers; not beside a writer of the
same journal directory in another process.`, args, nil)
	if err != nil {
		return err
	}
	j, err := journal.Open(dir, journal.Config{})
	if err != nil {
		return err
	}
	n, err := j.Compact()
	if cerr := j.Close(); err == nil {
		err = cerr
	}
	fmt.Fprintf(stdout, "compressed %d segment(s)\n", n)
	return err
}

func journalRepair(ctx context.Context, args []string, stdout io.Writer) error {
	var from, wait *string
	dir, jf, err := parseJournalArgs("repair", `Rewrites every corrupt segment: the records that still read back are kept
and each damaged range is re-requested (MoldUDP64, unicast) from the
retransmitter or rewinder at --from, which must hold it. Each segment is
rewritten whole to a new file (keeping its permissions), synced and
renamed over the damaged one: acknowledged data is never cut. Stop writers
of the journal first.

Restored records are timed evenly between the records around their range
(the last one before it and the first one after it), so a paced replay
sends them at about the original pace instead of in a burst; a range at
the end of the stream gets the time of the record before it, one at the
start the time of the record after it. Their packet grouping is not known:
pcap export gives them packets of their own unless they share a time.`, args, func(fs *flag.FlagSet) {
		from = fs.String("from", "", "re-request address of a rewinder or retransmitter, e.g. 127.0.0.1:31100 (required)")
		wait = fs.String("wait", "200ms", "how long to wait for answers before asking again (10 silent waits fail)")
	})
	if err != nil {
		return err
	}
	if *from == "" {
		return usageErr("--from ADDR is required: the re-request address of a rewinder or retransmitter holding the range")
	}
	server, err := parseAddr("--from", *from, false)
	if err != nil {
		return err
	}
	wd, err := time.ParseDuration(*wait)
	if err != nil || wd <= 0 {
		return usageErr("--wait %q: want a positive duration like 200ms", *wait)
	}
	j, err := journal.Open(dir, journal.Config{})
	if err != nil {
		return err
	}
	defer j.Close()
	infos, err := jf.streams(j)
	if err != nil {
		return err
	}
	repaired := 0
	for _, in := range infos {
		id := in.ID
		filled, err := j.Repair(id, func(r journal.Range) ([][]byte, error) {
			fmt.Fprintf(stdout, "%s: fetching [%d, %d) from %s\n", id, r.From, r.To, server)
			return fetch.Range(ctx, fetch.Config{Server: server, Session: id.Session, Wait: wd}, r.From, r.To)
		})
		for _, r := range filled {
			fmt.Fprintf(stdout, "%s: restored [%d, %d)\n", id, r.From, r.To)
		}
		repaired += len(filled)
		if err != nil {
			return err
		}
	}
	if repaired == 0 {
		fmt.Fprintln(stdout, "nothing to repair")
	}
	return nil
}
