package main

import (
	"flag"
	"os"
)

// Go processors of a subscriber process.
//
// "mdbus sub" runs on one Go processor per feed reader (one, or two with
// --secondary) unless told otherwise: each feed reader delivers on its own
// goroutine, and on one processor it also reads the repair sockets and
// sends the due re-requests while a gap waits (subscriber package doc, "one
// Go processor"), so no idle processor's thread is woken for each repair,
// re-request or timer. On two cores shared by a publisher and its
// subscriber that made recovery at 1% loss cost 0.95 of the lossless rate
// against 0.85 with the Go runtime's default of one processor per CPU
// (BENCHMARKS.md, "One Go processor per process, again"). A program that
// embeds the subscriber package chooses its own; the library does not.

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
	n, err := subProcs(fs, "procs", n)
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

// subProcs returns the GOMAXPROCS a process asks for: n from the flag
// named name when it was given, or when no GOMAXPROCS variable is set
// (the flag's default); 0 keeps the Go runtime's default, which follows
// the variable. It is a usage error for n to be negative.
func subProcs(fs *flag.FlagSet, name string, n int) (int, error) {
	if n < 0 {
		return 0, usageErr("--%s %d: want a count of Go processors (0 = one per CPU, the Go runtime's default)", name, n)
	}
	if !flagWasSet(fs, name) && os.Getenv("GOMAXPROCS") != "" {
		return 0, nil
	}
	return n, nil
}
