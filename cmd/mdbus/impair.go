package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net/netip"
	"sync/atomic"
	"time"

	"github.com/mdbus/mdbus/packetconn/impair"
	"github.com/mdbus/mdbus/tools/counters"
	impairtool "github.com/mdbus/mdbus/tools/impair"
)

func init() {
	register("impair", "relay one group to another, dropping, duplicating, reordering and delaying packets", runImpair)
}

// impairFlags are the receiving-side impairment flags of sub and demo.
type impairFlags struct {
	loss, reorder, dup *float64
	seed               *uint64
}

func addImpairFlags(fs *flag.FlagSet) impairFlags {
	return impairFlags{
		loss:    probFlag(fs, "loss", 0, "drop this fraction of received datagrams (0-1), to watch recovery"),
		reorder: probFlag(fs, "reorder", 0, "reorder this fraction of received datagrams (0-1)"),
		dup:     probFlag(fs, "dup", 0, "duplicate this fraction of received datagrams (0-1)"),
		seed:    fs.Uint64("impair-seed", 1, "seed of the impairment decisions"),
	}
}

func (f impairFlags) config() (impair.Config, bool, error) {
	c := impair.Config{Loss: *f.loss, Reorder: *f.reorder, Duplicate: *f.dup, Seed: *f.seed}
	if err := c.Validate(); err != nil {
		return c, false, usageErr("%v", err)
	}
	return c, c.Loss > 0 || c.Reorder > 0 || c.Duplicate > 0, nil
}

func runImpair(ctx context.Context, args []string, stdout io.Writer) error {
	fs := newFlags("impair", "--in GROUP:PORT --out GROUP:PORT [flags]", `Joins the --in group and forwards every datagram to the --out group through
the impairment layer (sending side: every subscriber of --out sees the same
loss). Subscribers of --out, with a retransmitter, show recovery live.
Ends on SIGINT or after --duration.`)
	in := fs.String("in", "", "group:port to read (required)")
	out := fs.String("out", "", "group:port to send to (required)")
	ifname := fs.String("interface", "lo", "interface for both groups")
	ttl := fs.Int("ttl", 0, "TTL of forwarded packets; 0 keeps them on this host")
	loss := probFlag(fs, "loss", 0.01, "drop probability per datagram (0-1)")
	reorder := probFlag(fs, "reorder", 0, "reorder probability per datagram (0-1)")
	dup := probFlag(fs, "dup", 0, "duplicate probability per datagram (0-1)")
	delay := fs.Duration("delay", 0, "added latency")
	jitter := fs.Duration("jitter", 0, "added uniform random latency, up to this")
	seed := fs.Uint64("seed", 1, "seed of the impairment decisions")
	dur := fs.Duration("duration", 0, "stop after this long (0 = until SIGINT)")
	fs.Bool("netns", false, "run inside a private user+network namespace")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	inG, err := netip.ParseAddrPort(*in)
	if err != nil {
		return usageErr("--in %q: want a multicast group:port", *in)
	}
	outG, err := netip.ParseAddrPort(*out)
	if err != nil {
		return usageErr("--out %q: want a multicast group:port", *out)
	}
	if *dur < 0 {
		return usageErr("--duration must not be negative")
	}
	if err := (impair.Config{Loss: *loss, Reorder: *reorder, Duplicate: *dup, Delay: *delay, Jitter: *jitter, Seed: *seed}).Validate(); err != nil {
		return usageErr("%v", err) // a negative --delay or --jitter
	}
	ops, err := startOps("impair")
	if err != nil {
		return err
	}
	defer ops.Close()
	lastLine := time.Now()
	var latest atomic.Pointer[impairtool.RelayStats]
	latest.Store(&impairtool.RelayStats{})
	counters.AttachStruct(ops.Counters(), "impair", func() any { return latest.Load() })
	cfg := impairtool.RelayConfig{
		In: inG, Out: outG, Interface: *ifname, TTL: *ttl,
		Impair:        impair.Config{Loss: *loss, Reorder: *reorder, Duplicate: *dup, Delay: *delay, Jitter: *jitter, Seed: *seed},
		Ready:         func() { env.log.Info("relaying", "in", inG.String(), "out", outG.String(), "interface", *ifname) },
		ProgressEvery: 100 * time.Millisecond,
		Progress: func(s impairtool.RelayStats) {
			latest.Store(&s)
			if time.Since(lastLine) < time.Second {
				return
			}
			lastLine = time.Now()
			fmt.Fprintf(stdout, "%s in %d out %d dropped %d duplicated %d reordered %d delayed %d\n",
				time.Now().Format("15:04:05"), s.Received, s.Impair.Out, s.Impair.Dropped, s.Impair.Duplicated, s.Impair.Reordered, s.Impair.Delayed)
		},
	}
	if *dur > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, *dur)
		defer cancel()
	}
	st, err := impairtool.Relay(ctx, cfg)
	latest.Store(&st)
	env.log.Info("summary", "received", st.Received, "sent", st.Impair.Out, "dropped", st.Impair.Dropped,
		"duplicated", st.Impair.Duplicated, "reordered", st.Impair.Reordered, "delayed", st.Impair.Delayed)
	if err != nil && ctx.Err() == nil {
		return err
	}
	return nil
}
