package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"runtime/debug"
	"strconv"
	"strings"
)

// The command-line conventions every command follows:
//   - a usage error (unknown or unparsable flag, bad value, stray
//     argument) prints one line saying what was wrong and where the help
//     is, and exits 2; -h prints the help and exits 0;
//   - counts and rates take one number syntax (parseNumber): 10000, 10k,
//     1.5M, 2G;
//   - NaN, infinities and negative values are refused, naming the flag.

// helpHint is the line's tail that says where the help is.
func helpHint(cmd string) string { return "run '" + cmd + " -h' for help" }

// parseFlags parses a command's arguments, none of which may be
// positional. Help (-h) is printed to stderr and returns flag.ErrHelp.
func parseFlags(fs *flag.FlagSet, args []string) error {
	if err := parseSome(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageErr("unexpected argument %q (this command takes flags only; %s)", fs.Arg(0), helpHint(fs.Name()))
	}
	return nil
}

// parseSome is parseFlags for commands that take positional arguments:
// it leaves them in fs.Args.
func parseSome(fs *flag.FlagSet, args []string) error {
	usage, out := fs.Usage, fs.Output()
	fs.Usage = func() {} // an error is one line, below, not the whole help
	fs.SetOutput(io.Discard)
	err := fs.Parse(args)
	fs.Usage = usage
	fs.SetOutput(out)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, flag.ErrHelp):
		fs.Usage()
		return err
	}
	return usageErr("%v (%s)", err, helpHint(fs.Name()))
}

// parseNumber parses a count or a rate: a decimal number with an optional
// suffix k (thousand), M (million) or G (billion): 250000, 10k, 1.5M, 2G.
// Negative values, NaN and infinities are errors.
func parseNumber(s string) (float64, error) {
	t := strings.ReplaceAll(strings.TrimSpace(s), "_", "")
	mult := 1.0
	if n := len(t); n > 0 {
		switch t[n-1] {
		case 'k', 'K':
			mult, t = 1e3, t[:n-1]
		case 'M':
			mult, t = 1e6, t[:n-1]
		case 'G':
			mult, t = 1e9, t[:n-1]
		}
	}
	v, err := strconv.ParseFloat(t, 64)
	switch {
	case err != nil && errors.Is(err, strconv.ErrRange):
		return 0, fmt.Errorf("%q is out of range", s)
	case err != nil || strings.Trim(t, "0123456789.eE+-") != "":
		// ParseFloat also takes "NaN", "Inf", "infinity" and hex floats.
		return 0, fmt.Errorf("%q is not a number: want a decimal number like 10000, 10k, 1.5M or 2G", s)
	case v < 0 || math.Signbit(v) && v == 0:
		return 0, fmt.Errorf("%q is negative", s)
	}
	v *= mult
	if math.IsInf(v, 0) {
		return 0, fmt.Errorf("%q is out of range", s)
	}
	return v, nil
}

// rateValue is a flag holding a rate: parseNumber's syntax, not negative,
// finite.
type rateValue float64

func (r *rateValue) String() string { return strconv.FormatFloat(float64(*r), 'g', -1, 64) }

func (r *rateValue) Set(s string) error {
	v, err := parseNumber(s)
	if err != nil {
		return err
	}
	*r = rateValue(v)
	return nil
}

// rateFlag defines a rate flag (messages or bytes per second).
func rateFlag(fs *flag.FlagSet, name string, def float64, usage string) *float64 {
	p := new(float64)
	*p = def
	fs.Var((*rateValue)(p), name, usage)
	return p
}

// countValue is a flag holding a count: parseNumber's syntax, a whole
// number that fits T.
type countValue[T int | int64 | uint | uint64] struct{ p *T }

func (c countValue[T]) String() string {
	if c.p == nil {
		return "0"
	}
	return fmt.Sprint(*c.p)
}

func (c countValue[T]) Set(s string) error {
	v, err := parseNumber(s)
	if err != nil {
		return err
	}
	if v != math.Trunc(v) {
		return fmt.Errorf("%q is not a whole number", s)
	}
	var zero T
	limit := float64(math.MaxInt64)
	if ^zero > 0 { // unsigned
		limit = math.MaxUint64
	}
	if v >= limit {
		return fmt.Errorf("%q is out of range", s)
	}
	*c.p = T(v)
	return nil
}

// countFlag defines a count flag.
func countFlag[T int | int64 | uint | uint64](fs *flag.FlagSet, name string, def T, usage string) *T {
	p := new(T)
	*p = def
	fs.Var(countValue[T]{p}, name, usage)
	return p
}

// versionString is "mdbus VERSION (commit COMMIT[, modified], built with GO)"
// from the build information the Go toolchain embeds.
func versionString() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "mdbus (no build information)"
	}
	v := bi.Main.Version
	if v == "" {
		v = "(devel)"
	}
	var rev, modified, when string
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			if s.Value == "true" {
				modified = ", modified"
			}
		case "vcs.time":
			when = " " + s.Value
		}
	}
	if rev == "" {
		rev = "unknown (built without VCS stamping)"
	}
	return fmt.Sprintf("mdbus %s (commit %s%s%s, %s)", v, rev, when, modified, bi.GoVersion)
}

// printVersion writes the version line.
func printVersion(w io.Writer) { fmt.Fprintln(w, versionString()) }

// probValue is a flag holding a probability in [0, 1].
type probValue float64

func (p *probValue) String() string { return strconv.FormatFloat(float64(*p), 'g', -1, 64) }

func (p *probValue) Set(s string) error {
	v, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
	if err != nil || v != v {
		return fmt.Errorf("%q is not a number: want a fraction from 0 to 1, like 0.01", s)
	}
	if v < 0 || v > 1 {
		return fmt.Errorf("%v is not a fraction from 0 to 1", s)
	}
	*p = probValue(v)
	return nil
}

// probFlag defines a probability flag (loss, reordering, duplication).
func probFlag(fs *flag.FlagSet, name string, def float64, usage string) *float64 {
	p := new(float64)
	*p = def
	fs.Var((*probValue)(p), name, usage)
	return p
}
