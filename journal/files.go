package journal

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"

	"github.com/mdbus/mdbus/internal/regfile"
	"github.com/mdbus/mdbus/wire"
)

// ErrNotRegular: a segment, stream directory or lock file that is a
// symbolic link, FIFO, socket or device instead of a regular file or
// directory. Readers refuse it at once instead of following or blocking.
var ErrNotRegular = errors.New("journal: not a regular file")

// openRegular opens path with flag without following a symbolic link and
// without blocking on a FIFO, and refuses anything but a regular file
// (internal/regfile): such errors match ErrNotRegular.
func openRegular(path string, flag int, perm fs.FileMode) (*os.File, error) {
	f, _, err := regfile.Open(path, flag, perm)
	if e, ok := errors.AsType[*regfile.Error](err); ok {
		return nil, fmt.Errorf("journal: %s is %s: %w", e.Path, e.Kind, ErrNotRegular)
	}
	return f, err
}

// readRegular reads a whole regular file (see openRegular).
func readRegular(path string, st *ioStats) ([]byte, error) {
	f, err := openRegular(path, os.O_RDONLY, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	b := make([]byte, fi.Size())
	n, err := io.ReadFull(f, b)
	st.read(n)
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) {
		return nil, err
	}
	return b[:n], nil
}

// Damage is a problem Open found in the layout of the journal rather than
// inside a record: a stream directory or segment that is missing, empty,
// renamed, linked or unparsable. Records it stands for are not readable;
// "mdbus journal verify" lists every one.
type Damage struct {
	Path   string
	Stream wire.StreamID // zero when the path names no stream
	Reason string
}

func (d Damage) String() string { return d.Path + ": " + d.Reason }

// Damage lists what Open found wrong in the journal's layout (see
// Damage), in the order found. A read-only Open reports a damaged stream
// directory or segment here and skips it; a read-write Open fails on a
// segment it cannot read (a damaged header, a non-regular file) and
// reports the rest here.
func (j *Journal) Damage() []Damage {
	j.mu.Lock()
	defer j.mu.Unlock()
	return append([]Damage(nil), j.damaged...)
}

func (j *Journal) damage(path string, id wire.StreamID, reason string) {
	j.log.Warn("journal: damage", "path", path, "reason", reason)
	j.mu.Lock()
	j.damaged = append(j.damaged, Damage{Path: path, Stream: id, Reason: reason})
	j.mu.Unlock()
}

// damageReason says what err found, without the path Damage carries.
func damageReason(err error) string {
	var ce *CorruptError
	if errors.As(err, &ce) {
		return ce.Reason
	}
	return err.Error()
}
