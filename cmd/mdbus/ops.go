package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/mdbus/mdbus/internal/logx"
	"github.com/mdbus/mdbus/subscriber"
	"github.com/mdbus/mdbus/tools/counters"
)

// globals are the flags every command takes, anywhere before "--":
// logging, counters and metrics. main strips them before the command's
// own flag set parses the rest.
type globals struct {
	logFormat, logLevel string
	counters            bool
	countersDir         string
	metrics             string
}

// env is this process's globals and logger, set by run.
var env = struct {
	globals
	log *slog.Logger
	// cleanup runs on a second signal, before the immediate exit: it
	// removes the counters file.
	mu      sync.Mutex
	cleanup []func()
}{log: slog.New(slog.NewTextHandler(os.Stderr, nil))}

const globalUsage = `Global flags (any command, anywhere before "--"):
  --log-format text|json   log lines on stderr as text (default) or JSON
  --log-level LEVEL        debug, info (default), warn or error
  --counters=false         keep no counters file (mdbus stat cannot see the process)
  --counters-dir DIR       directory of counters files (default $MDBUS_COUNTERS_DIR or /dev/shm/mdbus-UID, private)
  --metrics [HOST]:PORT    serve Prometheus metrics at http://HOST:PORT/metrics; PORT or :PORT alone
                           listens on loopback (127.0.0.1) only: name the address to expose it
                           (0.0.0.0:9464 every IPv4 address, [::]:9464 every address)
`

// parseGlobals takes the global flags out of args (a command's
// arguments) and returns the rest.
func parseGlobals(args []string) (globals, []string, error) {
	g := globals{logFormat: "text", logLevel: "info", counters: true, countersDir: os.Getenv("MDBUS_COUNTERS_DIR")}
	if g.countersDir == "" {
		g.countersDir = counters.DefaultDir()
	}
	var rest []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			rest = append(rest, args[i:]...)
			break
		}
		name, val, hasVal := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if !strings.HasPrefix(a, "-") {
			rest = append(rest, a)
			continue
		}
		var dst *string
		switch name {
		case "log-format":
			dst = &g.logFormat
		case "log-level":
			dst = &g.logLevel
		case "counters-dir":
			dst = &g.countersDir
		case "metrics":
			dst = &g.metrics
		case "counters":
			switch {
			case !hasVal || val == "true":
				g.counters = true
			case val == "false":
				g.counters = false
			default:
				return g, nil, usageErr("--counters=%q: want true or false", val)
			}
			continue
		default:
			rest = append(rest, a)
			continue
		}
		if !hasVal {
			if i+1 >= len(args) {
				return g, nil, usageErr("--%s needs a value", name)
			}
			i++
			val = args[i]
		}
		*dst = val
	}
	return g, rest, nil
}

// onSecondSignal registers fn to run before an immediate exit.
func onSecondSignal(fn func()) {
	env.mu.Lock()
	env.cleanup = append(env.cleanup, fn)
	env.mu.Unlock()
}

func runCleanup() {
	env.mu.Lock()
	fns := env.cleanup
	env.cleanup = nil
	env.mu.Unlock()
	for _, fn := range fns {
		fn()
	}
}

// roleOps is what a long-running command keeps for operating it: its
// counters file and, with --metrics, the Prometheus endpoint.
type roleOps struct {
	role string
	ctr  *counters.File
	srv  *http.Server
	done chan struct{}
	// metrics is the address --metrics listens on, nil without it.
	metrics net.Addr
}

// metricsAddr is the address --metrics listens on: "PORT" and ":PORT"
// mean loopback, so that counters are not served to the network unless
// an address says so; anything else is used as given.
func metricsAddr(s string) string {
	if s == "" {
		return s
	}
	if strings.HasPrefix(s, ":") {
		return "127.0.0.1" + s
	}
	if _, err := strconv.ParseUint(s, 10, 16); err == nil {
		return "127.0.0.1:" + s
	}
	return s
}

// startOps creates the counters file of role and starts --metrics. Close
// it after the command's final summary.
func startOps(role string) (*roleOps, error) {
	o := &roleOps{role: role}
	var err error
	o.ctr, err = counters.Create(counters.Config{Dir: env.countersDir, Role: role, Off: !env.counters})
	if err != nil && env.counters {
		// Observability must not stop the bus: keep the counters in memory
		// (--metrics still works) and say how to get the file back.
		env.log.Warn("no counters file: mdbus stat will not see this process", "err", err)
		o.ctr, err = counters.Create(counters.Config{Role: role, Off: true})
	}
	if err != nil {
		return nil, err
	}
	if p := o.ctr.Path(); p != "" {
		onSecondSignal(func() { os.Remove(p) })
		env.log.Debug("counters file", "path", p)
	}
	if env.metrics != "" {
		ln, err := net.Listen("tcp", metricsAddr(env.metrics))
		if err != nil {
			o.ctr.Close()
			return nil, fmt.Errorf("--metrics %s: %w (pick a free address:port, e.g. 127.0.0.1:9464)", env.metrics, err)
		}
		o.metrics = ln.Addr()
		mux := http.NewServeMux()
		mux.Handle("/metrics", counters.Handler(o.ctr))
		o.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
		o.done = make(chan struct{})
		go func() {
			defer close(o.done)
			if err := o.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
				env.log.Error("metrics server stopped", "err", err, "addr", ln.Addr().String())
			}
		}()
		env.log.Info("serving Prometheus metrics", "url", "http://"+ln.Addr().String()+"/metrics")
	}
	return o, nil
}

// Counters is the role's counters file.
func (o *roleOps) Counters() *counters.File { return o.ctr }

// Close takes a last sample (so a reader sees the final figures until the
// file goes), stops the metrics server and removes the counters file.
func (o *roleOps) Close() {
	o.ctr.SampleNow()
	if o.srv != nil {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		o.srv.Shutdown(ctx)
		cancel()
		<-o.done
	}
	if err := o.ctr.Close(); err != nil {
		env.log.Warn("counters file not removed", "err", err, "fix", "remove it by hand or run mdbus stat --clean")
	}
}

// newLogger builds env.log from the globals.
func newLogger(g globals, stderr io.Writer) (*slog.Logger, error) {
	l, err := logx.New(stderr, g.logFormat, g.logLevel)
	if err != nil {
		return nil, usageErr("%v", err)
	}
	return l, nil
}

// dropHints says what to do about each drop reason a subscriber counts.
var dropHints = map[subscriber.DropReason]string{
	subscriber.DropTruncatedDatagram: "a sender uses larger datagrams than the receive buffer: raise the subscriber's datagram size",
	subscriber.DropWrongGroup:        "another group shares this port: give each feed its own port",
	subscriber.DropWrongSource:       "another sender is on the group: check --source or find the sender",
	subscriber.DropTooManyStreams:    "more publishers on the group than streams allowed: find the extra senders",
	subscriber.DropSeqJump:           "a sender jumped far ahead: check for a restarted publisher reusing its session",
	subscriber.DropReorderFull:       "the reorder buffer filled while a gap waited: check loss on the path and the retransmitter",
	subscriber.DropUnknownRepair:     "repairs for a session nobody follows: check which retransmitter answers",
}

// watchDrops logs, once per interval, the datagrams s dropped since the
// last look, by reason, with what to do: a storm of malformed packets is
// one line per reason per interval with a count, never a line per packet.
// It returns when ctx ends, after a last look.
func watchDrops(ctx context.Context, who string, stats func() subscriber.Stats, every time.Duration) {
	var last subscriber.Stats
	t := time.NewTicker(every)
	defer t.Stop()
	for done := false; !done; {
		select {
		case <-ctx.Done():
			done = true // one last look, so the counts add up to the summary's
		case <-t.C:
		}
		st := stats()
		for r := range subscriber.NumDropReasons {
			d := st.Drops[r] - last.Drops[r]
			if d == 0 || r == subscriber.DropDuplicate || r == subscriber.DropStopped {
				continue // duplicates are normal with repairs and A/B feeds
			}
			hint, ok := dropHints[r]
			if !ok {
				hint = "a sender on this group does not speak MoldUDP64 correctly: find it (tcpdump -X on the group) or move the feed to another group"
			}
			env.log.Warn("datagrams dropped", "who", who, "reason", r.String(), "count", d, "total", st.Drops[r], "fix", hint)
		}
		if d := st.KernelDrops - last.KernelDrops; d > 0 {
			env.log.Warn("the kernel dropped datagrams: the receive buffer overflowed", "who", who, "count", d, "total", st.KernelDrops,
				"fix", "raise --rcvbuf and net.core.rmem_max, or use --busy-poll; repairs cover what a retransmitter holds")
		}
		last = st
	}
}
