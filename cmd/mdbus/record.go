package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strconv"
	"time"

	"github.com/mdbus/mdbus/journal"
	"github.com/mdbus/mdbus/recorder"
	"github.com/mdbus/mdbus/subscriber"
	"github.com/mdbus/mdbus/tools/counters"
	"github.com/mdbus/mdbus/wire"
)

func init() {
	register("record", "journal every stream of a multicast group to disk", runRecord)
}

// journalWriteFlags are the flags of the commands that write a journal.
type journalWriteFlags struct {
	dir, fsync, mode *string
	every            *time.Duration
}

func addJournalWriteFlags(fs *flag.FlagSet, required bool) journalWriteFlags {
	help := "journal directory (created if missing)"
	if !required {
		help = "also journal to this directory (created if missing)"
	}
	return journalWriteFlags{
		dir:   fs.String("journal", "", help),
		fsync: fs.String("fsync", "interval", "when records are fsynced: none (the OS decides), interval (every --fsync-every), every (each record)"),
		every: fs.Duration("fsync-every", 10*time.Millisecond, "with --fsync interval: the most a machine crash may lose"),
		mode:  fs.String("journal-mode", "0600", "permission (octal) of the journal files created; directories get the matching x bits (0600: 0700). Set exactly, whatever the umask; widen it (0640) to let a group read"),
	}
}

// open opens the journal, or returns nil when --journal was not given.
func (f journalWriteFlags) open() (*journal.Journal, error) {
	if *f.dir == "" {
		return nil, nil
	}
	cfg := journal.Config{SyncInterval: *f.every}
	switch *f.fsync {
	case "none":
		cfg.Sync = journal.SyncNone
	case "interval":
		cfg.Sync = journal.SyncInterval
	case "every":
		cfg.Sync = journal.SyncEvery
	default:
		return nil, usageErr("--fsync %q: want none, interval or every", *f.fsync)
	}
	if *f.every <= 0 {
		return nil, usageErr("--fsync-every %v: want a positive duration like 10ms", *f.every)
	}
	perm, err := strconv.ParseUint(*f.mode, 8, 32)
	if err != nil || perm > 0o777 || perm&0o600 != 0o600 {
		return nil, usageErr("--journal-mode %q: want an octal permission from 0600 to 0777 that lets the owner read and write, like 0640", *f.mode)
	}
	cfg.Perm = fs.FileMode(perm)
	j, err := journal.Open(*f.dir, cfg)
	if err != nil {
		return nil, fmt.Errorf("open journal %s: %w", *f.dir, err)
	}
	return j, nil
}

func runRecord(ctx context.Context, args []string, stdout io.Writer) error {
	fs := newFlags("record", "--journal DIR [flags]", `Joins a feed and journals every stream it hears (one journal incarnation per
stream incarnation: a new source port, a sequence restart, the stream after
an end of session), each message stamped with its receive time. With
--upstream it asks that retransmitter (pub --retransmit, rewind) for
whatever its own socket missed, so the journal has no holes. Read the
journal back with mdbus replay.`)
	gf := addGroupFlags(fs)
	jf := addJournalWriteFlags(fs, true)
	upstream := fs.String("upstream", "", "unicast address:port of a retransmitter to fill this recorder's own holes from; a comma-separated list adds backups, asked in turn when one stops answering")
	repair := fs.String("repair-group", "", "with --upstream: also join this repair group:port")
	fromStart := fs.Bool("from-start", false, "with --upstream: record each session from sequence 1, fetching what came before the join")
	rcvbuf := fs.Int("rcvbuf", 0, "feed socket receive buffer bytes to request (default 32 MiB)")
	stats := fs.Duration("stats", time.Second, "stats line interval (0 = none)")
	maxStreams := fs.Int("max-streams", subscriber.DefaultMaxStreams, "streams (source, session) recorded at once; packets of more are not journaled, logged and counted (refused)")
	maxPerSource := fs.Int("max-streams-per-source", subscriber.DefaultMaxStreamsPerSource, "of which from one source address (-1: no such bound)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *jf.dir == "" {
		return usageErr("--journal DIR is required")
	}
	if *rcvbuf < 0 || *stats < 0 {
		return usageErr("--rcvbuf and --stats must not be negative")
	}
	if *maxStreams < 1 || *maxPerSource == 0 || *maxPerSource < -1 {
		return usageErr("--max-streams %d, --max-streams-per-source %d: want at least 1 (per source: -1 for no bound)", *maxStreams, *maxPerSource)
	}
	group, source, err := gf.parse()
	if err != nil {
		return err
	}
	up, upBackups, err := parseRetransmitters("--upstream", *upstream)
	if err != nil {
		return err
	}
	rg, err := parseAddr("--repair-group", *repair, true)
	if err != nil {
		return err
	}
	if *fromStart && !up.IsValid() {
		return usageErr("--from-start needs --upstream: the history before the join must come from somewhere")
	}
	j, err := jf.open()
	if err != nil {
		return err
	}
	defer j.Close()
	var start wire.Seq
	if *fromStart {
		start = 1
	}
	rec, err := recorder.NewRecorder(recorder.Config{
		Feed: group, Interface: *gf.ifname, Source: source, ReadBuffer: *rcvbuf,
		Upstream: up, UpstreamBackups: upBackups, RepairGroup: rg, StartSeq: start, Journal: j,
		MaxStreams: *maxStreams, MaxStreamsPerSource: *maxPerSource,
	})
	if err != nil {
		return err
	}
	ops, err := startOps("record")
	if err != nil {
		rec.Close()
		return err
	}
	defer ops.Close() // after rec.Close: the last sample is final
	counters.AttachRecorder(ops.Counters(), "record", rec)
	fmt.Fprintf(os.Stderr, "mdbus record: journaling %s into %s\n", group, *jf.dir)
	var tick <-chan time.Time
	if *stats > 0 {
		t := time.NewTicker(*stats)
		defer t.Stop()
		tick = t.C
	}
	// Streams beyond the bounds are said once a second while they last,
	// whatever --stats says: a recording that misses streams must not be
	// silent about it.
	refusedTick := time.NewTicker(time.Second)
	defer refusedTick.Stop()
	var refusedSaid uint64
	sayRefused := func(ts recorder.TapStats) {
		if ts.RefusedPackets > refusedSaid {
			fmt.Fprintf(os.Stderr, "mdbus record: %d packets of streams beyond --max-streams %d (--max-streams-per-source %d) not journaled (%d in all); raise the bounds to record them\n",
				ts.RefusedPackets-refusedSaid, *maxStreams, *maxPerSource, ts.RefusedPackets)
			refusedSaid = ts.RefusedPackets
		}
	}
	for {
		select {
		case <-ctx.Done():
			err := rec.Close()
			ts, jerr := rec.Stats()
			fmt.Fprintf(os.Stderr, "mdbus record: journaled %d messages (%d bytes) in %d incarnations; %d packets of streams beyond --max-streams refused\n",
				ts.Messages, ts.Bytes, ts.Incarnations, ts.RefusedPackets)
			if jerr != nil {
				return jerr
			}
			return err
		case <-refusedTick.C:
			ts, _ := rec.Stats()
			sayRefused(ts)
		case <-tick:
			ts, jerr := rec.Stats()
			fst := rec.FeedStats()
			fmt.Fprintf(stdout, "%s journaled %d msgs %d bytes, %d incarnations, %d ended, %d refused packets | kernel drops %d, NAKs %d, recovered %d, lost %d\n",
				time.Now().Format("15:04:05"), ts.Messages, ts.Bytes, ts.Incarnations, ts.Ended, ts.RefusedPackets,
				fst.KernelDrops, fst.NAKs, fst.Recovered, fst.LostMessages)
			if jerr != nil {
				rec.Close()
				return fmt.Errorf("journal failed (recording stopped): %w", jerr)
			}
		}
	}
}
