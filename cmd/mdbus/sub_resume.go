package main

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"strconv"
	"sync"

	"github.com/mdbus/mdbus/journal"
	"github.com/mdbus/mdbus/resume"
	"github.com/mdbus/mdbus/subscriber"
	"github.com/mdbus/mdbus/wire"
)

// subResume is mdbus sub with a start position or a checkpoint: the feed
// is consumed through a resume.Consumer.
type subResume struct {
	start   resume.Start
	legacy  wire.Seq // --start N (a bare number): the subscriber's StartSeq, as before
	cp      *resume.Checkpoint
	out     *resume.Output
	j       *journal.Journal
	c       *resume.Consumer
	enabled bool
}

// parseSubResume reads --start, --checkpoint, --out and --journal.
func parseSubResume(start, ckpt, out, jdir string) (*subResume, error) {
	r := &subResume{}
	if n, err := strconv.ParseUint(start, 10, 64); err == nil {
		r.legacy = wire.Seq(n)
	} else {
		st, err := resume.ParseStart(start)
		if err != nil {
			return nil, usageErr("--start %q: want live, session, seq:N, time:RFC3339 or a sequence number", start)
		}
		r.start = st
	}
	r.enabled = ckpt != "" || r.start.Kind != resume.StartLive
	switch {
	case r.enabled && r.legacy != 0:
		return nil, usageErr("--start N (a bare number) cannot be combined with --checkpoint: use --start seq:N")
	case out != "" && ckpt == "":
		return nil, usageErr("--out needs --checkpoint (they are kept in step)")
	case r.start.Kind == resume.StartTime && jdir == "":
		return nil, usageErr("--start time:... needs --journal DIR to find the sequence at that time")
	}
	if !r.enabled {
		return r, nil
	}
	var err error
	if jdir != "" {
		if r.j, err = journal.Open(jdir, journal.Config{ReadOnly: true}); err != nil {
			return nil, fmt.Errorf("open journal %s: %w", jdir, err)
		}
	}
	if ckpt != "" {
		if r.cp, err = resume.OpenCheckpoint(ckpt, resume.CheckpointConfig{}); err != nil {
			r.close()
			return nil, err
		}
	}
	if out != "" {
		if r.out, err = resume.OpenOutput(out, r.cp); err != nil {
			r.close()
			return nil, err
		}
	}
	return r, nil
}

// writer is where messages go: the --out file, else stdout's writer,
// which mu guards. With a checkpoint but no --out, stdout is flushed
// before each checkpoint save: a sequence is saved only once its line
// has reached stdout, so a crash loses no line (at-least-once). Without
// the flush the checkpoint would run ahead of lines still in the buffer,
// and a restart would skip them.
func (r *subResume) writer(stdout *bufio.Writer, mu *sync.Mutex) *bufio.Writer {
	if r.out != nil {
		return r.out.Writer()
	}
	if r.cp != nil {
		r.cp.SetFlush(func() ([]byte, error) {
			mu.Lock()
			defer mu.Unlock()
			return nil, stdout.Flush()
		})
	}
	return stdout
}

// open starts the consumer for cfg.
func (r *subResume) open(cfg subscriber.Config) error {
	var err error
	r.c, err = resume.New(resume.Config{Feed: cfg, Checkpoint: r.cp, Start: r.start, Journal: r.j,
		OnMessage: cfg.OnMessage, OnEnd: cfg.OnEnd})
	if err == nil && (r.cp != nil || r.start.Kind != resume.StartLive) {
		fmt.Fprintf(os.Stderr, "mdbus sub: start %s, checkpoint %v\n", r.start, r.cp != nil)
	}
	return err
}

func (r *subResume) stats() subscriber.Stats { return r.c.FeedStats() }

// close stops the consumer (saving the checkpoint) and closes the rest.
func (r *subResume) close() error {
	var errs []error
	if r.c != nil {
		errs = append(errs, r.c.Close())
	}
	if r.out != nil {
		errs = append(errs, r.out.Close())
	}
	if r.cp != nil {
		errs = append(errs, r.cp.Close())
	}
	if r.j != nil {
		errs = append(errs, r.j.Close())
	}
	return errors.Join(errs...)
}
