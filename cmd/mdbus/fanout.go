package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/mdbus/mdbus/fanout"
	"github.com/mdbus/mdbus/subscriber"
	"github.com/mdbus/mdbus/tools/counters"
	"github.com/mdbus/mdbus/wire"
)

func init() {
	register("fanout", "subscribe once for the host and share the feed with local readers (sub --fanout) through shared memory", runFanout)
}

func runFanout(ctx context.Context, args []string, stdout io.Writer) error {
	fs := newFlags("fanout", "[flags]", `Joins a feed once for this host, recovers it (re-requests to --retransmit)
and writes the in-order stream, with loss notices, into a ring file in shared
memory: /dev/shm/mdbus-fanout-UID/NAME.ring (private to you; NAME defaults to
the group, "239.192.0.1-31001"). Any number of local consumers then read it
with "mdbus sub --fanout NAME" (or fanout.NewReader): the kernel copies each
packet once for the host instead of once per consumer, recovery runs once,
and a reader costs no system call per message.

A reader that falls more than the ring (--capacity) behind never slows the
writer or the other readers: it is told, fetches what it missed from
--retransmit (give readers the same one), and rejoins. Restarting this command
continues the same file under a new generation; readers notice and fetch the
gap. Example (in the lab, --netns, with a publisher and its retransmitter):

  mdbus pub --synthetic --rate 1000000 --retransmit 127.0.0.1:31100 &
  mdbus fanout --retransmit 127.0.0.1:31100 &
  mdbus sub --fanout 239.192.0.1-31001 --retransmit 127.0.0.1:31100 --stats 1s`)
	ff := addFeedFlags(fs)
	dir := fs.String("dir", "", "directory of ring files (default /dev/shm/mdbus-fanout-UID, created 0700)")
	name := fs.String("name", "", "ring name (default: the group, like 239.192.0.1-31001)")
	capMiB := fs.Int("capacity", 64, "ring data area in MiB, a power of two from 1 to 4096: how far a reader may fall behind before it must catch up by re-request (64 MiB holds 0.55 s of 64-byte messages at 1M msgs/s)")
	stats := fs.Duration("stats", time.Second, "stats line interval (0 = none)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	feed, err := ff.config()
	if err != nil {
		return err
	}
	if err := ff.setProcs(fs, 1); err != nil {
		return err
	}
	group := feed.Group
	if *capMiB < 1 || *capMiB > 4096 || *capMiB&(*capMiB-1) != 0 {
		return usageErr("--capacity %d: want a power of two from 1 to 4096 (MiB)", *capMiB)
	}
	if *stats < 0 {
		return usageErr("--stats must not be negative")
	}
	if *name == "" {
		*name = fanout.Name(group)
	}
	if strings.ContainsRune(*name, '/') {
		return usageErr("--name %q: a name, not a path (use --dir for the directory)", *name)
	}
	w, err := fanout.NewWriter(fanout.WriterConfig{
		Feed:     feed,
		Path:     fanout.Path(*dir, *name),
		Capacity: *capMiB << 20,
	})
	if err != nil {
		return err
	}
	defer w.Close()
	ops, err := startOps("fanout")
	if err != nil {
		return err
	}
	defer ops.Close()
	sub := w.Subscriber()
	counters.AttachSubscriberFuncs(ops.Counters(), "fanout", sub.Stats, sub.Streams)
	defer goWatchDrops(ctx, "fanout feed", sub.Stats)()
	defer func() {
		st, rs := sub.Stats(), w.Stats()
		env.log.Info("summary", "messages", st.Messages, "gaps", st.Gaps, "recovered", st.Recovered, "lost", st.LostMessages,
			"kernel_drops", st.KernelDrops, "ring", w.Path(), "generation", rs.Generation, "position", rs.Position, "wakeups", rs.Wakeups)
	}()
	env.log.Info("fanout", "feed", group.String(), "ring", w.Path(), "generation", w.Stats().Generation,
		"readers", "mdbus sub --fanout "+*name)
	tick, stopTick := ticker(*stats)
	defer stopTick()
	var last subscriber.Stats
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick:
			st, rs := sub.Stats(), w.Stats()
			fmt.Fprintf(stdout, "%s msgs %d (+%d) gaps %d recovered %d lost %d kernel-drops %d | ring gen %d at %d MiB, reader wake-ups %d\n",
				time.Now().Format("15:04:05"), st.Messages, st.Messages-last.Messages, st.Gaps, st.Recovered, st.LostMessages, st.KernelDrops,
				rs.Generation, rs.Position>>20, rs.Wakeups)
			last = st
		}
	}
}

// subFanout is what mdbus sub passes on when it reads a ring (--fanout).
type subFanout struct {
	ring       string
	start      string
	retransmit string
	stats      time.Duration
	count      int
	dur        time.Duration
	exitOnEnd  bool
	stopOnLoss bool
	spin       time.Duration
	pr         *msgPrinter // --format and --decode
}

// runSubFanout is "mdbus sub --fanout": the subscriber's output, read from
// a host fan-out ring instead of the network.
func runSubFanout(ctx context.Context, stdout io.Writer, o subFanout) error {
	var startSeq wire.Seq
	switch {
	case o.start == "live":
	case strings.HasPrefix(o.start, "seq:"):
		n, err := strconv.ParseUint(strings.TrimPrefix(o.start, "seq:"), 10, 64)
		if err != nil || n == 0 {
			return usageErr("--start %q: want seq:N with N from 1", o.start)
		}
		startSeq = wire.Seq(n)
	default:
		return usageErr("--start %q with --fanout: want live or seq:N (the history before the ring comes from --retransmit)", o.start)
	}
	if o.stopOnLoss {
		return usageErr("--stop-on-loss is not supported with --fanout")
	}
	if o.count < 0 || o.dur < 0 || o.stats < 0 {
		return usageErr("--count, --duration and --stats must not be negative")
	}
	retr, _, err := parseRetransmitters("--retransmit", o.retransmit)
	if err != nil {
		return err
	}
	out := bufio.NewWriterSize(stdout, 64<<10)
	defer out.Flush()
	var mu sync.Mutex              // guards out, n and lat
	run, end := runFor(ctx, o.dur) // the callbacks stop it at --count or an end with --exit-on-end
	defer end()
	n := 0
	var lat [4096]int64 // the ring's added latency, one message in 64
	nlat := 0
	var rd *fanout.Reader
	rd, err = fanout.NewReader(fanout.ReaderConfig{
		Path: fanout.Path("", o.ring), StartSeq: startSeq, Retransmitter: retr, Spin: o.spin,
		OnMessage: func(m subscriber.Message) {
			mu.Lock()
			defer mu.Unlock()
			if o.count > 0 && n >= o.count {
				return // done: the command is ending
			}
			n++
			if o.stats == 0 {
				o.pr.print(out, m)
			} else if n%64 == 0 {
				if st := rd.Stamp(); st != 0 {
					lat[nlat%len(lat)] = time.Now().UnixNano() - st
					nlat++
				}
			}
			if o.count > 0 && n >= o.count {
				end()
			}
		},
		OnLoss: func(l subscriber.Loss) {
			mu.Lock()
			fmt.Fprintf(out, "# LOST %s [%d, %d): %d messages could not be recovered\n", l.Stream.Session, l.From, l.To, l.To-l.From)
			mu.Unlock()
		},
		OnEnd: func(id subscriber.StreamID, next wire.Seq) {
			mu.Lock()
			fmt.Fprintf(out, "# end of session %s from %s at sequence %d\n", id.Session, id.Source, next)
			mu.Unlock()
			if o.exitOnEnd {
				end()
			}
		},
		OnLap: func(l fanout.Lap) {
			env.log.Warn("lapped: the writer overwrote what this reader had not read; catching up by re-request", "behind_bytes", l.Behind)
		},
		OnRestart: func(g uint64) { env.log.Info("the fanout writer restarted", "generation", g) },
		OnError:   func(err error) { env.log.Error("fanout reader", "err", err) },
	})
	if err != nil {
		return err
	}
	defer rd.Close()
	defer func() {
		st := rd.Stats()
		mu.Lock()
		out.Flush()
		mu.Unlock()
		env.log.Info("summary", "messages", st.Messages, "fetched", st.Fetched, "lost", st.Lost, "laps", st.Laps,
			"restarts", st.Restarts, "wakeups", st.Wakeups, "generation", st.Generation, "writer", st.Writer)
	}()
	tick, stopTick := ticker(o.stats)
	defer stopTick()
	var last fanout.ReaderStats
	for {
		select {
		case <-run.Done():
			return nil
		case <-tick:
			st := rd.Stats() // never under mu: the callbacks take mu
			mu.Lock()
			k := min(nlat, len(lat))
			s := slices.Clone(lat[:k])
			nlat = 0
			fmt.Fprintf(out, "%s msgs %d (+%d) fetched %d lost %d laps %d behind %d KiB wake-ups %d gen %d",
				time.Now().Format("15:04:05"), st.Messages, st.Messages-last.Messages, st.Fetched, st.Lost, st.Laps, st.Behind>>10, st.Wakeups, st.Generation)
			if st.Writer != "live" {
				fmt.Fprintf(out, " | writer %s", st.Writer)
			}
			if k > 0 {
				slices.Sort(s)
				fmt.Fprintf(out, " | added latency p50 %v p99 %v", time.Duration(s[k/2]), time.Duration(s[k*99/100]))
			}
			out.WriteByte('\n')
			out.Flush()
			mu.Unlock()
			last = st
		}
	}
}
