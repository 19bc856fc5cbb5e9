package main

import (
	"flag"
	"os"

	"github.com/mdbus/mdbus/bench"
)

// Go processors.
//
// "mdbus sub" and "mdbus pub" run on one Go processor per busy loop unless
// --procs says otherwise: sub one per feed reader (two with --secondary),
// fanout one, pub one for its publishing loop and one more for a --journal
// writer. A feed reader delivers on its own goroutine and, on one
// processor, also reads the repair sockets and sends the due re-requests
// while a gap waits (subscriber package doc, "one Go processor"); pub's
// publishing loop sends the packets it fills and answers --retransmit's
// requests between sends (publisher and retransmit package docs). With
// the Go runtime's default of one processor per CPU the other processors'
// threads are woken for each hand-off, repair, re-request and timer, and
// both processes' threads wander across the cores they share. On the
// two-core benchmark host, issue 16's capacity run at 1% loss gave 0.94-
// 0.96 of the lossless rate with these defaults against 0.84-0.96 (median
// 0.88) with the runtime's, and a higher lossless rate too (BENCHMARKS.md,
// "One Go processor by default"). More processors pay where the process
// has more busy goroutines than this count: a program that publishes from
// several goroutines embeds the packages and chooses its own; --procs 0
// or a GOMAXPROCS variable restores the runtime's choice. The demo runs
// five roles in one process and keeps the runtime's default.

// procsHook sets the process's GOMAXPROCS. main sets it; commands run
// in-process by tests leave their test binary's processors alone.
var procsHook func(n int) int

// addProcsFlag defines --procs, whose default is one Go processor per
// busy goroutine of the command, as about says.
func addProcsFlag(fs *flag.FlagSet, about string) *int {
	return fs.Int("procs", 1, "Go processors (GOMAXPROCS) this process runs on: "+about+"; 0: the Go runtime's default, one per CPU (also when a GOMAXPROCS variable is set and this flag is not given)")
}

// applyProcs gives this process the Go processors --procs (n) asks for:
// busy, the command's busy goroutines, unless the flag or a GOMAXPROCS
// variable says otherwise.
func applyProcs(fs *flag.FlagSet, n, busy int) error {
	n, err := wantProcs(fs, "procs", n)
	if err != nil {
		return err
	}
	if n == 1 && !flagWasSet(fs, "procs") {
		n = busy
	}
	if n > 0 && procsHook != nil {
		procsHook(n)
	}
	return nil
}

// wantProcs returns the GOMAXPROCS a process asks for: n from the flag
// named name when it was given, or when no GOMAXPROCS variable is set
// (the flag's default); 0 keeps the Go runtime's default, which follows
// the variable. It is a usage error for n to be negative.
func wantProcs(fs *flag.FlagSet, name string, n int) (int, error) {
	if n < 0 || n > bench.MaxProcs {
		return 0, usageErr("--%s %d: want a count of Go processors from 1 to %d (0 = one per CPU, the Go runtime's default)", name, n, bench.MaxProcs)
	}
	if !flagWasSet(fs, name) && os.Getenv("GOMAXPROCS") != "" {
		return 0, nil
	}
	return n, nil
}

// benchProcs is wantProcs for the bench's --sub-procs and --pub-procs, in
// the bench's terms: a negative count keeps the Go runtime's default
// (bench.Config.SubProcs, PubProcs; 0 there means 1).
func benchProcs(fs *flag.FlagSet, name string, n int) (int, error) {
	n, err := wantProcs(fs, name, n)
	if n == 0 {
		n = -1
	}
	return n, err
}

// addSubProcsFlag defines the bench's --sub-procs (bench, bench group).
func addSubProcsFlag(fs *flag.FlagSet) *int {
	return fs.Int("sub-procs", 1, "Go processors (GOMAXPROCS) of each subscriber process: 1 as 'mdbus sub' runs; 0: the Go runtime's default (one per CPU), as does a GOMAXPROCS variable when this flag is not given")
}
