package resume

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"os"
)

// Output is a file the application appends what it makes of each
// delivered message to, kept in step with a Checkpoint: each snapshot
// saves the output's length (after flushing it), and OpenOutput cuts the
// file back to the length of the last snapshot. Together with resuming at
// that snapshot this gives exactly-once output across a crash: the file
// holds each checkpointed message once, and nothing of the messages after
// the snapshot, which the restarted consumer delivers again.
//
// Write to Writer only from OnMessage (the delivering goroutine).
type Output struct {
	f *os.File
	w *bufio.Writer
	n counted // f, counting what reaches it
}

// counted counts the bytes written to the file: a bufio.Writer writes
// through on its own when its buffer fills, so its Buffered count at a
// flush is not all that was written since the last.
type counted struct {
	f   *os.File
	off int64
}

func (c *counted) Write(b []byte) (int, error) {
	n, err := c.f.Write(b)
	c.off += int64(n)
	return n, err
}

// OpenOutput opens (creating) the output at path, truncates it to the
// length recorded in cp's last snapshot (0 when cp holds none: a fresh
// start), and makes cp save its length with every snapshot.
func OpenOutput(path string, cp *Checkpoint) (*Output, error) {
	var off int64
	if tok := cp.Token(); len(tok) == 8 {
		off = int64(binary.BigEndian.Uint64(tok))
	} else if len(tok) != 0 {
		return nil, fmt.Errorf("%w: its token is not an output length", ErrCheckpoint)
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("resume: output: %w", err)
	}
	fi, err := f.Stat()
	if err == nil && fi.Size() < off {
		err = fmt.Errorf("resume: output %s holds %d bytes, less than the %d its checkpoint recorded (a different file?)", path, fi.Size(), off)
	}
	if err == nil {
		err = f.Truncate(off)
	}
	if err == nil {
		_, err = f.Seek(off, io.SeekStart)
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("resume: output %s: %w", path, err)
	}
	o := &Output{f: f, n: counted{f: f, off: off}}
	o.w = bufio.NewWriterSize(&o.n, 256<<10)
	cp.SetFlush(o.flush)
	return o, nil
}

// Writer is where the application writes.
func (o *Output) Writer() *bufio.Writer { return o.w }

// flush is the Checkpoint's Flush: the output's length as a token.
func (o *Output) flush() ([]byte, error) {
	if err := o.w.Flush(); err != nil {
		return nil, fmt.Errorf("resume: output: %w", err)
	}
	return binary.BigEndian.AppendUint64(nil, uint64(o.n.off)), nil
}

// Close flushes and closes the file. Close the Consumer (which saves the
// checkpoint, flushing the output) first.
func (o *Output) Close() error {
	err := o.w.Flush()
	if cerr := o.f.Close(); err == nil {
		err = cerr
	}
	return err
}
