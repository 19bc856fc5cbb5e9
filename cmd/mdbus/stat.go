package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/mdbus/mdbus/tools/counters"
)

func init() {
	register("stat", "show the live counters of the mdbus processes on this host, like top", runStat)
}

const statAbout = `Lists the mdbus processes of this host from their counters files
(--dir, default /dev/shm/mdbus) and shows their counters live: totals with
rates per second, one row per stream. --once prints one view and exits;
--json prints JSON (one document per refresh) for scripts.

Files of processes that are gone (pid not running, or reused by another
process) are reported as stale and removed (--clean=false keeps them).
Files of other users' processes are listed as unreadable where
permissions forbid reading them: run as that user, or as root.`

// statProc is one process in a view.
type statProc struct {
	Path       string      `json:"path"`
	State      string      `json:"state"`
	PID        int         `json:"pid,omitempty"`
	Role       string      `json:"role,omitempty"`
	Cmdline    string      `json:"cmdline,omitempty"`
	Started    time.Time   `json:"started,omitzero"`
	Sampled    time.Time   `json:"sampled,omitzero"`
	Consistent bool        `json:"consistent"`
	Values     []statValue `json:"values,omitempty"`
	Error      string      `json:"error,omitempty"`
	Removed    bool        `json:"removed,omitempty"`
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

// statViewer keeps the readers and the previous values across refreshes.
type statViewer struct {
	dir     string
	clean   bool
	readers map[string]*counters.Reader
	prev    map[string]map[string]int64 // path -> value key -> value
	prevAt  map[string]time.Time
}

func (sv *statViewer) close() {
	for _, r := range sv.readers {
		r.Close()
	}
}

func (sv *statViewer) view() ([]statProc, error) {
	es, err := counters.Scan(sv.dir)
	if err != nil {
		return nil, err
	}
	var out []statProc
	seen := map[string]bool{}
	for _, e := range es {
		p := statProc{Path: e.Path, State: e.State.String(), PID: e.Header.PID, Role: e.Header.Role,
			Cmdline: e.Header.Cmdline, Started: e.Header.Created}
		switch e.State {
		case counters.Unreadable:
			p.Error = fmt.Sprintf("%v (another user's process? run mdbus stat as that user or root)", e.Err)
		case counters.Invalid:
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
		out = append(out, p)
	}
	for path, r := range sv.readers {
		if !seen[path] {
			r.Close()
			delete(sv.readers, path)
			delete(sv.prev, path)
			delete(sv.prevAt, path)
		}
	}
	return out, nil
}

func (sv *statViewer) read(p *statProc) {
	r := sv.readers[p.Path]
	if r == nil {
		var err error
		if r, err = counters.Open(p.Path); err != nil {
			p.State = counters.Unreadable.String()
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

func runStat(ctx context.Context, args []string, stdout io.Writer) error {
	fs := newFlags("stat", "[flags]", statAbout)
	dir := fs.String("dir", "", "directory of counters files (default --counters-dir: $MDBUS_COUNTERS_DIR or /dev/shm/mdbus)")
	interval := fs.Duration("interval", time.Second, "refresh interval")
	once := fs.Bool("once", false, "print one view and exit")
	asJSON := fs.Bool("json", false, "print JSON, one document per refresh")
	clean := fs.Bool("clean", true, "remove the files of processes that are gone")
	count := countFlag(fs, "count", 0, "exit after this many refreshes (0 = until SIGINT)")
	role := fs.String("role", "", "show only processes of this role (pub, sub, rewind, ...)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *interval <= 0 || *count < 0 {
		return usageErr("--interval must be positive and --count not negative")
	}
	if *dir == "" {
		*dir = env.countersDir
	}
	if *once {
		*count = 1
	}
	sv := &statViewer{dir: *dir, clean: *clean, readers: map[string]*counters.Reader{},
		prev: map[string]map[string]int64{}, prevAt: map[string]time.Time{}}
	defer sv.close()
	w := bufio.NewWriter(stdout)
	defer w.Flush()
	live := !*asJSON && !*once
	t := time.NewTicker(*interval)
	defer t.Stop()
	for n := 1; ; n++ {
		procs, err := sv.view()
		if err != nil {
			return fmt.Errorf("scan %s: %w", *dir, err)
		}
		if *role != "" {
			kept := procs[:0]
			for _, p := range procs {
				if p.Role == *role {
					kept = append(kept, p)
				}
			}
			procs = kept
		}
		if *asJSON {
			if procs == nil {
				procs = []statProc{}
			}
			if err := json.NewEncoder(w).Encode(map[string]any{"time": time.Now(), "dir": *dir, "processes": procs}); err != nil {
				return err
			}
		} else {
			if live {
				w.WriteString("\x1b[H\x1b[2J") // home, clear: redraw like top
			}
			renderStat(w, *dir, procs)
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

// streamCols are the columns of the per-stream table.
var streamCols = []struct {
	kind counters.Kind
	head string
	rate bool
}{
	{counters.StreamNextSeq, "next", false},
	{counters.StreamMessages, "msgs", false},
	{counters.StreamMessages, "msgs/s", true},
	{counters.StreamBytes, "bytes/s", true},
	{counters.StreamGaps, "gaps", false},
	{counters.StreamNAKs, "naks", false},
	{counters.StreamRepairs, "repairs", false},
	{counters.StreamPending, "pending", false},
	{counters.StreamLost, "lost", false},
	{counters.StreamDuplicates, "dups", false},
	{counters.StreamHeld, "held", false},
	{counters.StreamProgressAge, "age-ms", false},
}

func renderStat(w io.Writer, dir string, procs []statProc) {
	fmt.Fprintf(w, "mdbus stat  %s  %s  %d processes\n", time.Now().Format("15:04:05"), dir, len(procs))
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
			fmt.Fprintf(w, "%s  pid %d  %s: %s  (%s)\n", orDash(p.Role), p.PID, what, p.Error, p.Path)
			continue
		}
		fmt.Fprintf(w, "%s  pid %d  up %s  %s\n", p.Role, p.PID, time.Since(p.Started).Round(time.Second), clipStr(p.Cmdline, 60))
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
			fmt.Fprintf(w, "  %s\n", o)
			line := "   "
			for _, v := range byOwner[o] {
				cell := " " + v.Name
				if v.Label != "" && v.Label != v.Name {
					cell += "{" + v.Label + "}"
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
			fmt.Fprintf(w, "  %-36s", clipStr(o, 36))
			for i, c := range streamCols {
				cell := "-"
				for _, v := range byOwner[o] {
					if counters.Kind(v.Kind) != c.kind {
						continue
					}
					switch {
					case c.kind == counters.StreamNextSeq:
						cell = fmt.Sprint(v.Value)
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

// colWidth is the width of column i of the stream table: the next
// sequence is exact, the rest human.
func colWidth(i int) int {
	if i == 0 {
		return 12
	}
	return 8
}

// human formats v in at most 7 columns: 1234, 12.3k, 1.23M, 4.56G.
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

func clipStr(s string, n int) string {
	if len(s) > n {
		return s[:n-1] + "…"
	}
	return s
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
