// Command mdbus is the one binary of the mdbus market-data bus: publish,
// subscribe, run the demo, relay with impairment, rewind, benchmark, and
// look at the running processes (stat).
//
// Every long-running command keeps its counters in a file under
// /dev/shm/mdbus-UID (private to the user) that "mdbus stat" reads live (tools/counters), serves
// them to Prometheus with --metrics ADDR, logs through log/slog
// (--log-format, --log-level; repeated records rate limited by
// internal/logx), and ends cleanly on SIGINT or SIGTERM: flush, end of
// session, a final summary, counters file removed, exit 0. A second signal
// exits at once.
//
// Run "mdbus help" for the subcommands and "mdbus CMD -h" for each one's
// flags. Everything defaults to the loopback interface and TTL 0: no
// packet leaves the host unless a flag says so. --netns runs a subcommand
// inside a private network namespace (internal/netlab).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"runtime"
	"slices"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/mdbus/mdbus/bench"
	"github.com/mdbus/mdbus/internal/logx"
	"github.com/mdbus/mdbus/internal/netlab"
	"github.com/mdbus/mdbus/publisher"
	"github.com/mdbus/mdbus/recorder"
	"github.com/mdbus/mdbus/replay"
	"github.com/mdbus/mdbus/resume"
	"github.com/mdbus/mdbus/retransmit"
	"github.com/mdbus/mdbus/subscriber"
	"github.com/mdbus/mdbus/tools/statsd"
)

type command struct {
	summary string
	run     func(ctx context.Context, args []string, stdout io.Writer) error
}

var commands = map[string]command{}

func register(name, summary string, run func(ctx context.Context, args []string, stdout io.Writer) error) {
	commands[name] = command{summary, run}
}

func usage(w io.Writer) {
	fmt.Fprint(w, `mdbus: a low-latency UDP multicast market-data bus speaking MoldUDP64.

Usage: mdbus COMMAND [flags]

Commands:
`)
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "  %-8s %s\n", n, commands[n].summary)
	}
	fmt.Fprint(w, `
Run "mdbus COMMAND -h" for a command's flags; "mdbus --version" prints the
version and commit. Defaults never leave the host:
interface lo, multicast TTL 0. Add --netns to run inside a private network
namespace where nothing can reach a real network.

`+globalUsage+`
SIGINT or SIGTERM ends a command cleanly (flush, end of session, summary,
counters file removed, exit 0); a second signal exits at once.
`)
}

func main() {
	procsHook = runtime.GOMAXPROCS
	os.Exit(run(os.Args, os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	// Global flags may come before or after the command name.
	g, rest, gerr := parseGlobals(args[1:])
	if gerr != nil {
		fmt.Fprintf(stderr, "mdbus: %v\n", gerr)
		return 2
	}
	if len(rest) > 0 && rest[0] != "--" {
		reexecArgs = args
		args = append([]string{args[0]}, rest...)
	}
	if len(args) >= 2 && (args[1] == "--version" || args[1] == "-version" || args[1] == "version") {
		printVersion(stdout)
		return 0
	}
	if len(args) < 2 || args[1] == "help" || args[1] == "-h" || args[1] == "--help" {
		usage(stdout)
		if len(args) < 2 {
			return 2
		}
		return 0
	}
	cmd, ok := commands[args[1]]
	if !ok {
		fmt.Fprintf(stderr, "mdbus: unknown command %q (run 'mdbus help' for the commands)\n", args[1])
		return 2
	}
	cmdArgs := args[2:]
	env.globals = g
	var err error
	env.log, err = newLogger(g, stderr)
	if err == nil {
		slog.SetDefault(env.log) // libraries that log to the default (subscriber) go through ours
	}
	if err != nil {
		fmt.Fprintf(stderr, "mdbus %s: %v\n", args[1], err)
		return 2
	}
	if wantNetns(args[1], cmdArgs) && !netlab.Inside() {
		code, err := netlab.Reexec(reexecArgs, nil)
		if err != nil {
			fmt.Fprintf(stderr, "mdbus %s: --netns: %v\n", args[1], err)
			return 1
		}
		return code
	}
	if netlab.Inside() {
		if err := netlab.Setup(); err != nil {
			fmt.Fprintf(stderr, "mdbus %s: %v\n", args[1], err)
			return 1
		}
	}
	ctx, stop := notifyContext(stderr, args[1])
	defer stop()
	err = cmd.run(ctx, cmdArgs, stdout)
	logx.Flush(env.log)
	if isConfigError(err) && !errors.Is(err, errUsage) {
		err = usageErr("%v", err) // a flag's value a role refused: a usage error
	}
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
		return 0
	case errors.Is(err, errUsage):
		msg := strings.TrimPrefix(err.Error(), errUsage.Error()+": ")
		if !strings.Contains(msg, " -h' for help") {
			name := "mdbus " + args[1]
			if len(cmdArgs) > 0 && slices.Contains(subcommands[args[1]], cmdArgs[0]) {
				name += " " + cmdArgs[0]
			}
			msg += " (" + helpHint(name) + ")"
		}
		fmt.Fprintf(stderr, "mdbus %s: %s\n", args[1], msg)
		return 2
	default:
		msg := err.Error()
		if errors.Is(err, syscall.EADDRINUSE) {
			msg += " (another process holds that address: stop it, or give this command another address or port; see 'mdbus " + args[1] + " -h')"
		}
		fmt.Fprintf(stderr, "mdbus %s: %s\n", args[1], msg)
		return 1
	}
}

// notifyContext returns a context cancelled by the first SIGINT or
// SIGTERM; a second one runs the cleanups (removing the counters file) and
// exits at once with status 1.
func notifyContext(stderr io.Writer, name string) (context.Context, func()) {
	ctx, cancel := context.WithCancel(context.Background())
	ch := make(chan os.Signal, 2)
	signal.Notify(ch, os.Interrupt, syscall.SIGTERM)
	done := make(chan struct{})
	go func() {
		select {
		case s := <-ch:
			env.log.Info("signal: finishing (a second signal exits at once)", "signal", s.String())
			cancel()
		case <-done:
			return
		}
		first := time.Now()
		for {
			select {
			case <-ch:
			case <-done:
				return
			}
			// Inside the lab (--netns) a Ctrl-C arrives twice: from the
			// terminal and relayed by the parent. Only a signal well after
			// the first is a second one.
			if !netlab.Inside() || time.Since(first) > 250*time.Millisecond {
				break
			}
		}
		runCleanup()
		fmt.Fprintf(stderr, "mdbus %s: second signal: exiting at once\n", name)
		os.Exit(1)
	}()
	return ctx, func() {
		signal.Stop(ch)
		close(done)
		cancel()
	}
}

// isConfigError reports whether err is a role refusing its configuration,
// which on this command line comes from flags.
func isConfigError(err error) bool {
	for _, target := range []error{publisher.ErrConfig, subscriber.ErrConfig, retransmit.ErrConfig, recorder.ErrConfig,
		replay.ErrConfig, resume.ErrConfig, statsd.ErrConfig, bench.ErrConfig} {
		if errors.Is(err, target) {
			return true
		}
	}
	return false
}

// subcommands lists the commands whose first argument is a subcommand
// with its own -h.
var subcommands = map[string][]string{
	"journal": {"list", "verify", "dump", "compact", "repair"},
	"pcap":    {"import", "export"},
	"statsd":  {"relay", "collect", "send"},
	"bench":   {"throughput", "latency", "raw", "capacity", "goals", "chart", "group"},
}

// reexecArgs is the command line as given, globals included, for the
// re-execution inside the lab.
var reexecArgs = os.Args

// errUsage marks errors in the command line: exit code 2.
var errUsage = errors.New("usage")

func usageErr(format string, a ...any) error {
	return fmt.Errorf("%w: %s", errUsage, fmt.Sprintf(format, a...))
}

// wantNetns reports whether args ask for --netns (before any positional
// argument). The flag is also defined in each command's flag set, so that
// -h lists it and parsing accepts it.
func wantNetns(cmd string, args []string) bool {
	want := netnsDefault[cmd]
	for _, a := range args {
		switch a {
		case "--netns", "-netns", "--netns=true", "-netns=true":
			want = true
		case "--netns=false", "-netns=false":
			want = false
		case "--":
			return want
		}
	}
	return want
}

// netnsDefault names the commands that run in the lab unless told not to.
var netnsDefault = map[string]bool{"demo": true}

// newFlags returns a flag set whose -h output teaches: the summary, the
// usage line and every flag with its default.
func newFlags(name, usageLine, about string) *flag.FlagSet {
	fs := flag.NewFlagSet("mdbus "+name, flag.ContinueOnError)
	fs.Usage = func() {
		w := fs.Output()
		fmt.Fprintf(w, "Usage: mdbus %s %s\n\n%s\n\nFlags:\n", name, usageLine, about)
		fs.PrintDefaults()
	}
	return fs
}

// flagWasSet reports whether the command line set flag name of fs.
func flagWasSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}
