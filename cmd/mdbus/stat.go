package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/mdbus/mdbus/tools/counters"
)

func init() {
	register("stat", "show the live counters of the mdbus processes on this host, like top", runStat)
}

const statAbout = `Lists the mdbus processes of this host from their counters files
(--dir, default your own private /dev/shm/mdbus-UID) and shows them live.
The default view fits an 80x24 terminal: one line per process (role, pid,
state, uptime, messages/s, what matters for the role, command line) and
one per stream it receives:

  MSG/S  messages delivered per second
  LAG    sequences behind the publisher's next sequence, when the
         publisher's counters are in view, else behind the highest
         sequence the stream has seen (heartbeats included)
  GAPS NAKS LOST   gap ranges found, re-requests sent, messages given up
  RCV99  time from finding a gap to filling it, 99th percentile
  AGE    since the stream's sequences last moved
  STATE  running, ended (end of session delivered), stopped (by a
         loss), replaced (by a newer incarnation), stale (nothing moved
         for 5 s: an idle or stalled feed)

A subscriber's process line shows lat99, the one-way latency p99 of
stamped messages (sub --stats; pub --synthetic stamps them). dup-drop
counts duplicates received and dropped: the application never sees a
duplicate. --full shows every counter; --json prints the same with
rates, one document per refresh. Rates are over the refresh interval;
the first view (and --once) samples twice, --window apart.

Only regular files of the directory's owner are read: a FIFO, link,
device or foreign file in the directory is listed as skipped with the
reason, never opened for reading. Every string from a file is printed
with control characters escaped. A directory other users may write to,
or that belongs to someone else, is refused. Root sees every user's
processes with --all-users (every /dev/shm/mdbus-*), or one user's with
--dir /dev/shm/mdbus-UID. Files of processes that are gone are reported
as stale and removed (--clean=false keeps them).`

// statProc is one process in a view.
type statProc struct {
	Path       string       `json:"path"`
	State      string       `json:"state"`
	Owner      string       `json:"owner,omitempty"` // the file's owner (a user name)
	PID        int          `json:"pid,omitempty"`
	Role       string       `json:"role,omitempty"`
	Cmdline    string       `json:"cmdline,omitempty"`
	Started    time.Time    `json:"started,omitzero"`
	Sampled    time.Time    `json:"sampled,omitzero"`
	Consistent bool         `json:"consistent"`
	Values     []statValue  `json:"values,omitempty"`
	Streams    []statStream `json:"streams,omitempty"`
	Error      string       `json:"error,omitempty"`
	Removed    bool         `json:"removed,omitempty"`
}

type statValue struct {
	Kind  uint32   `json:"kind"`
	Name  string   `json:"name"`
	Type  string   `json:"type"`
	Label string   `json:"label,omitempty"`
	Owner string   `json:"owner"`
	Value int64    `json:"value"`
	Rate  *float64 `json:"rate,omitempty"` // per second, counters only, from the previous view
}

func (v statValue) key() string { return fmt.Sprint(v.Kind, "|", v.Label, "|", v.Owner) }

// statStream is the summary of one stream a process receives: the
// default view's stream line.
type statStream struct {
	Owner      string   `json:"owner"`  // NAME/SESSION@SOURCE
	Stream     string   `json:"stream"` // SESSION@SOURCE
	Rate       *float64 `json:"rate,omitempty"`
	Next       int64    `json:"next"`
	Lag        *int64   `json:"lag,omitempty"`
	LagFrom    string   `json:"lag_from,omitempty"` // "publisher" or "horizon"
	Gaps       int64    `json:"gaps"`
	NAKs       int64    `json:"naks"`
	Lost       int64    `json:"lost"`
	DupDropped int64    `json:"dup_dropped"`
	RecoveryUS *int64   `json:"recovery_p99_us,omitempty"`
	AgeMS      int64    `json:"age_ms"`
	State      string   `json:"state"`
}

// staleAfter is how long a running stream's sequences may stand still
// before the view calls it stale.
const staleAfter = 5 * time.Second

// statDir is one directory scanned.
type statDir struct {
	Path  string `json:"path"`
	Error string `json:"error,omitempty"`
}

// statViewer keeps the readers and the previous values across refreshes.
type statViewer struct {
	dir      string
	allUsers bool
	prefix   string // of every user's directory, with allUsers
	clean    bool
	readers  map[string]*counters.Reader
	prev     map[string]map[string]int64 // path -> value key -> value
	prevAt   map[string]time.Time
}

func newStatViewer(dir string, allUsers, clean bool) *statViewer {
	return &statViewer{dir: dir, allUsers: allUsers, prefix: counters.DirPrefix, clean: clean, readers: map[string]*counters.Reader{},
		prev: map[string]map[string]int64{}, prevAt: map[string]time.Time{}}
}

func (sv *statViewer) close() {
	for _, r := range sv.readers {
		r.Close()
	}
}

// dirs lists the directories to scan: --dir, or with --all-users every
// user's default directory.
func (sv *statViewer) dirs() ([]string, error) {
	if !sv.allUsers {
		return []string{sv.dir}, nil
	}
	m, err := filepath.Glob(sv.prefix + "*")
	if err != nil {
		return nil, err
	}
	var out []string
	for _, d := range m {
		if _, ok := counters.DirOwner(d); ok {
			out = append(out, d)
		}
	}
	return out, nil
}

// view reads every directory. A directory that cannot be trusted is an
// error with one directory, a line of the view with --all-users.
func (sv *statViewer) view() ([]statDir, []statProc, error) {
	dirs, err := sv.dirs()
	if err != nil {
		return nil, nil, err
	}
	var sds []statDir
	var out []statProc
	seen := map[string]bool{}
	for _, d := range dirs {
		sd := statDir{Path: d}
		es, err := counters.Scan(d)
		if err != nil {
			if !sv.allUsers {
				return nil, nil, err
			}
			sd.Error = err.Error()
		}
		sds = append(sds, sd)
		for _, e := range es {
			out = append(out, sv.entry(e, seen))
		}
	}
	for path, r := range sv.readers {
		if !seen[path] {
			r.Close()
			delete(sv.readers, path)
			delete(sv.prev, path)
			delete(sv.prevAt, path)
		}
	}
	summarizeStreams(out)
	return sds, out, nil
}

func (sv *statViewer) entry(e counters.Entry, seen map[string]bool) statProc {
	p := statProc{Path: e.Path, State: e.State.String(), PID: e.Header.PID, Role: e.Header.Role,
		Cmdline: e.Header.Cmdline, Started: e.Header.Created}
	if e.Owner >= 0 {
		p.Owner = counters.UserName(e.Owner)
	}
	switch e.State {
	case counters.Unreadable:
		p.Error = fmt.Sprintf("%v (another user's process? run mdbus stat as that user or root)", e.Err)
	case counters.Invalid, counters.Skipped:
		p.Error = e.Err.Error()
	case counters.Stale:
		p.Error = fmt.Sprintf("process %d is gone", e.Header.PID)
		if sv.clean {
			if err := os.Remove(e.Path); err != nil && !errors.Is(err, os.ErrNotExist) {
				p.Error += fmt.Sprintf("; not removed: %v", err)
			} else {
				p.Removed = true
			}
		}
	case counters.Live:
		seen[e.Path] = true
		sv.read(&p)
	}
	return p
}

func (sv *statViewer) read(p *statProc) {
	r := sv.readers[p.Path]
	if r == nil {
		var err error
		if r, err = counters.Open(p.Path); err != nil {
			p.State = counters.Unreadable.String()
			if errors.Is(err, counters.ErrNotRegular) || errors.Is(err, counters.ErrForeign) {
				p.State = counters.Skipped.String() // swapped since the scan
			}
			p.Error = err.Error()
			return
		}
		sv.readers[p.Path] = r
	}
	s, err := r.Snapshot()
	if err != nil {
		p.State, p.Error = counters.Invalid.String(), err.Error()
		return
	}
	p.Sampled, p.Consistent = s.Sampled, s.Consistent
	prev, at := sv.prev[p.Path], sv.prevAt[p.Path]
	dt := s.Sampled.Sub(at).Seconds()
	cur := make(map[string]int64, len(s.Values))
	for _, v := range s.Values {
		sv := statValue{Kind: uint32(v.Kind), Name: v.Kind.Name(), Type: v.Type.String(), Label: v.Label, Owner: v.Owner, Value: v.Value}
		if sv.Name == "" {
			sv.Name = v.Label
		}
		cur[sv.key()] = v.Value
		if old, ok := prev[sv.key()]; ok && v.Type == counters.Counter && dt > 0 {
			r := float64(v.Value-old) / dt
			sv.Rate = &r
		}
		p.Values = append(p.Values, sv)
	}
	if prev == nil || s.Sampled.After(at) {
		sv.prev[p.Path], sv.prevAt[p.Path] = cur, s.Sampled
	}
}

// summarizeStreams fills each live process's Streams from its per-stream
// values, with the lag against the next sequence of the publisher of the
// stream's session where a publisher in view names it.
func summarizeStreams(procs []statProc) {
	// The publisher's next sequence, moved to each subscriber's sampling
	// time at the publisher's rate: two files are sampled up to an
	// interval apart, which at 20k msgs/s is 2,000 sequences.
	type pubSeq struct {
		next    int64
		rate    float64
		sampled time.Time
	}
	pubNext := map[string]pubSeq{} // session -> publisher
	for _, p := range procs {
		var rate float64
		for _, v := range p.Values {
			if counters.Kind(v.Kind) == counters.PubPublished && v.Rate != nil {
				rate = *v.Rate
			}
		}
		for _, v := range p.Values {
			if counters.Kind(v.Kind) == counters.PubNextSeq && v.Label != "" {
				pubNext[v.Label] = pubSeq{v.Value, rate, p.Sampled}
			}
		}
	}
	for i := range procs {
		p := &procs[i]
		byOwner := map[string]*statStream{}
		var horizon = map[string]int64{}
		for _, v := range p.Values {
			name, stream, ok := strings.Cut(v.Owner, "/")
			if !ok || name == "" || stream == "" {
				continue
			}
			s := byOwner[v.Owner]
			if s == nil {
				s = &statStream{Owner: v.Owner, Stream: stream, State: counters.StreamRunning.String()}
				byOwner[v.Owner] = s
			}
			switch counters.Kind(v.Kind) {
			case counters.StreamNextSeq:
				s.Next = v.Value
			case counters.StreamMessages:
				s.Rate = v.Rate
			case counters.StreamGaps:
				s.Gaps = v.Value
			case counters.StreamNAKs:
				s.NAKs = v.Value
			case counters.StreamLost:
				s.Lost = v.Value
			case counters.StreamDupDropped:
				s.DupDropped = v.Value
			case counters.StreamRecoveryP99:
				us := v.Value
				s.RecoveryUS = &us
			case counters.StreamProgressAge:
				s.AgeMS = v.Value
			case counters.StreamState:
				s.State = counters.StreamStateValue(v.Value).String()
			case counters.StreamHorizon:
				horizon[v.Owner] = v.Value
			}
		}
		for _, s := range byOwner {
			session, _, _ := strings.Cut(s.Stream, "@")
			if pub, ok := pubNext[session]; ok {
				next := pub.next
				if !pub.sampled.IsZero() && !p.Sampled.IsZero() {
					next += int64(pub.rate * p.Sampled.Sub(pub.sampled).Seconds())
				}
				lag := max(next-s.Next, 0)
				s.Lag, s.LagFrom = &lag, "publisher"
			} else if h, ok := horizon[s.Owner]; ok && h > 0 {
				lag := max(h-s.Next, 0)
				s.Lag, s.LagFrom = &lag, "horizon"
			}
			if s.State == counters.StreamRunning.String() && time.Duration(s.AgeMS)*time.Millisecond >= staleAfter {
				s.State = "stale"
			}
			p.Streams = append(p.Streams, *s)
		}
		sort.Slice(p.Streams, func(a, b int) bool { return p.Streams[a].Owner < p.Streams[b].Owner })
	}
}

func runStat(ctx context.Context, args []string, stdout io.Writer) error {
	fs := newFlags("stat", "[flags]", statAbout)
	dir := fs.String("dir", "", "directory of counters files (default --counters-dir: $MDBUS_COUNTERS_DIR or /dev/shm/mdbus-UID)")
	allUsers := fs.Bool("all-users", false, "every user's directory ("+counters.DirPrefix+"*): as root, every mdbus process of the host")
	interval := fs.Duration("interval", time.Second, "refresh interval")
	window := fs.Duration("window", 200*time.Millisecond, "for the first view and --once: sample twice this far apart, so rates show (0: no rates in the first view)")
	once := fs.Bool("once", false, "print one view and exit")
	full := fs.Bool("full", false, "every counter of every process, not the 80-column summary")
	asJSON := fs.Bool("json", false, "print JSON, one document per refresh, with rates and stream summaries")
	clean := fs.Bool("clean", true, "remove the files of processes that are gone")
	count := countFlag(fs, "count", 0, "exit after this many refreshes (0 = until SIGINT)")
	role := fs.String("role", "", "show only processes of this role (pub, sub, rewind, ...)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *interval <= 0 || *count < 0 || *window < 0 {
		return usageErr("--interval must be positive, --count and --window not negative")
	}
	if *dir == "" {
		*dir = env.countersDir
	}
	if *once {
		*count = 1
	}
	sv := newStatViewer(*dir, *allUsers, *clean)
	w := bufio.NewWriter(stdout)
	defer w.Flush()
	live := !*asJSON && !*once
	where := *dir
	if *allUsers {
		where = counters.DirPrefix + "*"
	}
	// Each view runs on its own goroutine, so that a signal ends stat
	// even if reading a file ever blocked: nothing found in a directory
	// may hold the command past SIGINT or SIGTERM.
	busy := false
	defer func() {
		if !busy {
			sv.close()
		}
	}()
	type result struct {
		dirs  []statDir
		procs []statProc
		err   error
	}
	next := func() (result, bool) {
		ch := make(chan result, 1)
		busy = true
		go func() {
			var r result
			r.dirs, r.procs, r.err = sv.view()
			ch <- r
		}()
		select {
		case r := <-ch:
			busy = false
			return r, true
		case <-ctx.Done():
			return result{}, false
		}
	}
	if *window > 0 { // a first sample, so that the first view has rates
		sv.clean = false // the view shown reports what it removes
		_, ok := next()
		sv.clean = *clean
		if !ok {
			return nil
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(*window):
		}
	}
	t := time.NewTicker(*interval)
	defer t.Stop()
	for n := 1; ; n++ {
		r, ok := next()
		if !ok {
			return nil
		}
		if r.err != nil {
			return fmt.Errorf("scan %s: %w", where, r.err)
		}
		procs := r.procs
		if *role != "" {
			kept := procs[:0]
			for _, p := range procs {
				if p.Role == *role {
					kept = append(kept, p)
				}
			}
			procs = kept
		}
		switch {
		case *asJSON:
			if procs == nil {
				procs = []statProc{}
			}
			if err := json.NewEncoder(w).Encode(map[string]any{"time": time.Now(), "dir": where, "dirs": r.dirs, "processes": procs}); err != nil {
				return err
			}
		default:
			if live {
				w.WriteString("\x1b[H\x1b[2J") // home, clear: redraw like top
			}
			if *full {
				renderFull(w, where, r.dirs, procs)
			} else {
				renderStat(w, where, r.dirs, procs, *allUsers)
			}
		}
		w.Flush()
		if *count > 0 && n >= *count {
			return nil
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// statWidth is the width of the default view: every line fits.
const statWidth = 80

// maxStreamLines bounds the stream lines of one process in the default
// view; --full shows them all.
const maxStreamLines = 8

// renderStat writes the default view: a title, two column headers, a
// line per process and a line per stream, each at most statWidth
// columns. Every string from a file is escaped (termSafe).
func renderStat(w io.Writer, where string, dirs []statDir, procs []statProc, allUsers bool) {
	line := func(format string, a ...any) {
		fmt.Fprintln(w, strings.TrimRight(clipStr(fmt.Sprintf(format, a...), statWidth), " "))
	}
	title := fmt.Sprintf("mdbus stat %s  %s", time.Now().Format("15:04:05"), plural(len(procs), "process", "processes"))
	if !allUsers {
		if u := dirUser(where); u != "" {
			title += "  user " + termSafe(u)
		}
	}
	line("%s  %s", title, termSafe(where)) // the path last: clipped first
	for _, d := range dirs {
		if d.Error != "" {
			fmt.Fprintf(w, "! %s\n", termSafe(d.Error)) // whole: what to do is at its end
		}
	}
	if len(procs) == 0 {
		line("  no mdbus process is running with counters here")
		return
	}
	user := ""
	if allUsers {
		user = fmt.Sprintf(" %-8s", "USER")
	}
	line("%-10s %7s%s %-8s %4s %5s  %s", "ROLE", "PID", user, "STATE", "UP", "MSG/S", "DETAIL")
	line(streamLine, "STREAM", "MSG/S", "LAG", "GAPS", "NAKS", "LOST", "RCV99", "AGE", "STATE")
	cmds := distinctCmdlines(procs)
	for _, p := range procs {
		if allUsers {
			user = " " + fmt.Sprintf("%-8s", clipStr(termSafe(orDash(p.Owner)), 8))
		}
		state := p.State
		if state == counters.Live.String() {
			state = "running"
		}
		head := fmt.Sprintf("%-10s %7d%s %-8s", clipStr(termSafe(orDash(p.Role)), 10), p.PID, user, state)
		if p.State != counters.Live.String() {
			what := p.Error
			if p.Removed {
				what += ", removed"
			}
			line("%s %s (%s)", head, termSafe(what), termSafe(filepath.Base(p.Path)))
			continue
		}
		up := "-"
		if !p.Started.IsZero() {
			up = shortDur(time.Since(p.Started))
		}
		rate := "-"
		if r, ok := procRate(p); ok {
			rate = optHuman(&r)
		}
		detail := procDetail(p)
		if cmd := cmds[p.Path]; cmd != "" {
			if detail != "" {
				detail += " · "
			}
			detail += cmd
		}
		line("%s %4s %5s  %s", head, up, rate, termSafe(detail))
		for i, s := range p.Streams {
			if i == maxStreamLines {
				line("  … %d more streams (--full shows them)", len(p.Streams)-i)
				break
			}
			line(streamLine, clipStr(termSafe(s.Stream), 31), optHuman(s.Rate), optInt(s.Lag),
				short(s.Gaps), short(s.NAKs), short(s.Lost), optMicros(s.RecoveryUS),
				shortDur(time.Duration(s.AgeMS)*time.Millisecond), s.State)
		}
	}
}

// streamLine is the format of a stream line: 2+31+6+6+3*5+6+5+9 = 80
// columns with the longest state ("replaced").
const streamLine = "  %-31s %5s %5s %4s %4s %4s %5s %4s %s"

// dirUser names the owner of dir, "" if unknown.
func dirUser(dir string) string {
	fi, err := os.Stat(dir)
	if err != nil {
		return ""
	}
	if u, ok := fileUID(fi); ok {
		return counters.UserName(u)
	}
	return ""
}

// procRate is the process's main message rate: messages published or
// delivered, over its roles.
func procRate(p statProc) (float64, bool) {
	var sum float64
	found := false
	for _, v := range p.Values {
		if strings.Contains(v.Owner, "/") || v.Rate == nil {
			continue
		}
		switch counters.Kind(v.Kind) {
		case counters.PubMessages, counters.SubMessages:
			sum += *v.Rate
			found = true
		}
	}
	return sum, found
}

// procDetail is what matters most of each role, in a few words.
func procDetail(p statProc) string {
	var parts []string
	var reqRate *float64
	var refused int64
	for _, v := range p.Values {
		if strings.Contains(v.Owner, "/") {
			continue
		}
		switch counters.Kind(v.Kind) {
		case counters.PubNextSeq:
			parts = append(parts, "next "+strconv.FormatInt(v.Value, 10))
		case counters.SubLatencyP99:
			parts = append(parts, "lat99 "+micros(v.Value))
		case counters.SubKernelDrops:
			if v.Value > 0 {
				parts = append(parts, "kdrop "+human(float64(v.Value)))
			}
		case counters.RetrRequests:
			switch {
			case v.Label == "received":
				reqRate = v.Rate
			case strings.HasPrefix(v.Label, "refused-"):
				refused += v.Value
			}
		}
	}
	if reqRate != nil {
		parts = append(parts, "req "+human(*reqRate)+"/s")
		if refused > 0 {
			parts = append(parts, "refused "+human(float64(refused)))
		}
	}
	return strings.Join(parts, " ")
}

// shortCmdline drops the program path and the global flags that every
// process of a test or script shares, so that what tells processes apart
// fits the line.
func shortCmdline(cmd string) string {
	f := strings.Fields(cmd)
	if len(f) == 0 {
		return ""
	}
	var out []string
	for i := 1; i < len(f); i++ {
		name, _, hasVal := strings.Cut(strings.TrimLeft(f[i], "-"), "=")
		if strings.HasPrefix(f[i], "-") {
			switch name {
			case "log-format", "log-level", "counters-dir", "metrics":
				if !hasVal {
					i++
				}
				continue
			case "counters":
				continue
			}
		}
		out = append(out, f[i])
	}
	return strings.Join(out, " ")
}

// distinctCmdlines returns, by path, the command line of each live
// process without the program path and shared global flags and, where
// several processes share a role, without the command word when the
// role column says it, and without the arguments they all share:
// what tells two subscribers apart (a --loss, another --group) is what
// fits the line. "…" marks what was left out.
func distinctCmdlines(procs []statProc) map[string]string {
	type unit = string
	byRole := map[string][][]unit{}
	units := map[string][]unit{}
	for _, p := range procs {
		if p.State != counters.Live.String() {
			continue
		}
		u := cmdUnits(shortCmdline(p.Cmdline))
		if len(u) > 0 && u[0] == p.Role {
			u = u[1:] // the ROLE column says it
		}
		units[p.Path] = u
		byRole[p.Role] = append(byRole[p.Role], u)
	}
	out := map[string]string{}
	for _, p := range procs {
		u, ok := units[p.Path]
		if !ok {
			continue
		}
		peers := byRole[p.Role]
		if len(peers) < 2 || len(u) == 0 {
			out[p.Path] = strings.Join(u, " ")
			continue
		}
		var kept []string
		for _, x := range u {
			shared := true
			for _, q := range peers {
				if !slices.Contains(q, x) {
					shared = false
					break
				}
			}
			if !shared {
				kept = append(kept, x)
			}
		}
		if len(kept) < len(u) {
			kept = append([]string{"…"}, kept...)
		}
		out[p.Path] = strings.Join(kept, " ")
	}
	return out
}

// cmdUnits splits a command line into its words, a flag and its value
// ("--loss 0.02") kept as one.
func cmdUnits(cmd string) []string {
	f := strings.Fields(cmd)
	var out []string
	for i := 0; i < len(f); i++ {
		if strings.HasPrefix(f[i], "-") && !strings.Contains(f[i], "=") && i+1 < len(f) && !strings.HasPrefix(f[i+1], "-") {
			out = append(out, f[i]+" "+f[i+1])
			i++
			continue
		}
		out = append(out, f[i])
	}
	return out
}

func plural(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return strconv.Itoa(n) + " " + many
}

// renderFull writes every counter of every process (--full).
func renderFull(w io.Writer, where string, dirs []statDir, procs []statProc) {
	fmt.Fprintf(w, "mdbus stat  %s  %s  %d processes\n", time.Now().Format("15:04:05"), termSafe(where), len(procs))
	for _, d := range dirs {
		if d.Error != "" {
			fmt.Fprintf(w, "! %s\n", termSafe(d.Error))
		}
	}
	if len(procs) == 0 {
		fmt.Fprintln(w, "  no mdbus process is running with counters here")
	}
	for _, p := range procs {
		fmt.Fprintln(w)
		if p.State != counters.Live.String() {
			what := p.State
			if p.Removed {
				what += ", removed"
			}
			fmt.Fprintf(w, "%s  pid %d  user %s  %s: %s  (%s)\n", termSafe(orDash(p.Role)), p.PID, termSafe(orDash(p.Owner)), what,
				termSafe(p.Error), termSafe(p.Path))
			continue
		}
		fmt.Fprintf(w, "%s  pid %d  user %s  up %s  %s\n", termSafe(p.Role), p.PID, termSafe(orDash(p.Owner)),
			time.Since(p.Started).Round(time.Second), termSafe(p.Cmdline))
		// Owners in first-seen order: role totals, then streams.
		byOwner := map[string][]statValue{}
		var owners []string
		for _, v := range p.Values {
			if _, ok := byOwner[v.Owner]; !ok {
				owners = append(owners, v.Owner)
			}
			byOwner[v.Owner] = append(byOwner[v.Owner], v)
		}
		var streams []string
		for _, o := range owners {
			if strings.Contains(o, "/") {
				streams = append(streams, o)
				continue
			}
			fmt.Fprintf(w, "  %s\n", termSafe(o))
			line := "   "
			for _, v := range byOwner[o] {
				cell := " " + termSafe(v.Name)
				if v.Label != "" && v.Label != v.Name {
					cell += "{" + termSafe(v.Label) + "}"
				}
				cell += " " + human(float64(v.Value))
				if v.Rate != nil {
					cell += " (" + human(*v.Rate) + "/s)"
				}
				if len(line)+len(cell) > 118 {
					fmt.Fprintln(w, line)
					line = "   "
				}
				line += cell
			}
			fmt.Fprintln(w, line)
		}
		if len(streams) == 0 {
			continue
		}
		sort.Strings(streams)
		fmt.Fprintf(w, "  %-36s", "stream")
		for i, c := range streamCols {
			fmt.Fprintf(w, " %*s", colWidth(i), c.head)
		}
		fmt.Fprintln(w)
		for _, o := range streams {
			fmt.Fprintf(w, "  %-36s", clipStr(termSafe(o), 36))
			for i, c := range streamCols {
				cell := "-"
				for _, v := range byOwner[o] {
					if counters.Kind(v.Kind) != c.kind {
						continue
					}
					switch {
					case c.kind == counters.StreamNextSeq || c.kind == counters.StreamHorizon:
						cell = fmt.Sprint(v.Value)
					case c.kind == counters.StreamState:
						cell = counters.StreamStateValue(v.Value).String()
					case !c.rate:
						cell = human(float64(v.Value))
					case v.Rate != nil:
						cell = human(*v.Rate)
					}
				}
				fmt.Fprintf(w, " %*s", colWidth(i), cell)
			}
			fmt.Fprintln(w)
		}
	}
}

// streamCols are the columns of the per-stream table of --full.
var streamCols = []struct {
	kind counters.Kind
	head string
	rate bool
}{
	{counters.StreamNextSeq, "next", false},
	{counters.StreamHorizon, "horizon", false},
	{counters.StreamMessages, "msgs", false},
	{counters.StreamMessages, "msgs/s", true},
	{counters.StreamBytes, "bytes/s", true},
	{counters.StreamGaps, "gaps", false},
	{counters.StreamNAKs, "naks", false},
	{counters.StreamRepairs, "repairs", false},
	{counters.StreamPending, "pending", false},
	{counters.StreamLost, "lost", false},
	{counters.StreamDupDropped, "dup-drop", false},
	{counters.StreamHeld, "held", false},
	{counters.StreamProgressAge, "age-ms", false},
	{counters.StreamState, "state", false},
}

// colWidth is the width of column i of the --full stream table: the
// sequences are exact, the rest human.
func colWidth(i int) int {
	if i < 2 {
		return 12
	}
	return 8
}

// human formats v in at most 6 columns: 1234, 12.3k, 1.23M, 4.56G.
func human(v float64) string {
	a := v
	if a < 0 {
		a = -a
	}
	switch {
	case a < 1e4:
		if v == float64(int64(v)) {
			return fmt.Sprint(int64(v))
		}
		return fmt.Sprintf("%.1f", v)
	case a < 1e6:
		return fmt.Sprintf("%.1fk", v/1e3)
	case a < 1e9:
		return fmt.Sprintf("%.2fM", v/1e6)
	case a < 1e12:
		return fmt.Sprintf("%.2fG", v/1e9)
	}
	return fmt.Sprintf("%.3g", v)
}

func optHuman(v *float64) string {
	if v == nil {
		return "-"
	}
	if *v < 10 && *v != float64(int64(*v)) {
		return fmt.Sprintf("%.1f", *v)
	}
	return human(float64(int64(*v + 0.5)))
}

func optInt(v *int64) string {
	if v == nil {
		return "-"
	}
	return human(float64(*v))
}

// short formats a count in at most 4 columns: 9999, 12k, 999k, 1.2M, 12M, 1.2G.
func short(v int64) string {
	a := float64(v)
	switch {
	case v < 0:
		return "<0"
	case v < 1e4:
		return strconv.FormatInt(v, 10)
	case v < 1e6:
		return fmt.Sprintf("%dk", v/1000)
	case v < 1e7:
		return fmt.Sprintf("%.1fM", a/1e6)
	case v < 1e9:
		return fmt.Sprintf("%dM", v/1000000)
	case v < 1e10:
		return fmt.Sprintf("%.1fG", a/1e9)
	}
	return fmt.Sprintf("%dG", v/1000000000)
}

func optMicros(v *int64) string {
	if v == nil || *v == 0 {
		return "-"
	}
	return micros(*v)
}

// micros formats a duration in µs in at most 5 columns.
func micros(us int64) string {
	d := time.Duration(us) * time.Microsecond
	switch {
	case d < time.Millisecond:
		return fmt.Sprintf("%dus", us)
	case d < 10*time.Millisecond:
		return fmt.Sprintf("%.1fms", float64(us)/1e3)
	case d < time.Second:
		return fmt.Sprintf("%dms", us/1000)
	}
	return shortDur(d)
}

// shortDur formats d in at most 4 columns: 0.3s, 12s, 59m, 23h, 400d.
func shortDur(d time.Duration) string {
	switch {
	case d < time.Second:
		return fmt.Sprintf("%.1fs", d.Seconds())
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh", int(d.Hours()))
	}
	return fmt.Sprintf("%dd", int(d.Hours()/24))
}

// termSafe escapes what a terminal would act on: C0 and C1 control
// characters (ESC starts cursor moves, title changes, colours), DEL, and
// Unicode format characters (bidirectional overrides reorder what is
// shown). Every string read from a counters file goes through it: the
// file's writer may be hostile.
func termSafe(s string) string {
	safe := true
	for _, r := range s {
		if unsafeRune(r) {
			safe = false
			break
		}
	}
	if safe {
		return s
	}
	var b strings.Builder
	for i, r := range s {
		switch {
		case r == utf8.RuneError:
			if _, n := utf8.DecodeRuneInString(s[i:]); n == 1 {
				fmt.Fprintf(&b, `\x%02x`, s[i])
				continue
			}
			b.WriteRune(r)
		case r < 0x80 && unsafeRune(r):
			fmt.Fprintf(&b, `\x%02x`, r)
		case unsafeRune(r):
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

func unsafeRune(r rune) bool {
	return r < 0x20 || r == 0x7f || r >= 0x80 && r < 0xa0 || r == utf8.RuneError || unicode.Is(unicode.Cf, r) ||
		r == 0x2028 || r == 0x2029
}

// clipStr cuts s to n columns (runes), ending in "…" when cut.
func clipStr(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n-1]) + "…"
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// fileUID is the uid of fi's owner.
func fileUID(fi os.FileInfo) (int, bool) { return counters.FileOwner(fi) }
