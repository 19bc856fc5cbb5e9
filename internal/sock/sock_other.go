//go:build !linux

package sock

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"runtime"
	"time"
)

// ErrUnsupported is returned by Open where batched multicast sockets are
// not implemented (everywhere but Linux). It matches errors.ErrUnsupported.
var ErrUnsupported = fmt.Errorf("sock: mdbus sockets are not supported on %s (Linux only): %w", runtime.GOOS, errors.ErrUnsupported)

// connSys is empty: no Conn is ever opened here.
type connSys struct{}

func open(cfg Config) (*Conn, error) {
	return nil, fmt.Errorf("sock: open %s: %w", cfg.Local, ErrUnsupported)
}

func (c *Conn) join(*net.Interface, netip.Addr, netip.Addr) error { return ErrUnsupported }

func (c *Conn) setDeadline(time.Time) {}

func (c *Conn) detached() bool { return false }

func (c *Conn) rawWriteTo([]byte, netip.AddrPort) error { return ErrUnsupported }

func (c *Conn) closeRaw() error { return ErrUnsupported }

// ReadBatch fails: Open never returns a Conn here.
func (c *Conn) ReadBatch(*Batch) (int, error) { return 0, ErrUnsupported }

// TryReadBatch fails: Open never returns a Conn here.
func (c *Conn) TryReadBatch(*Batch) (int, error) { return 0, ErrUnsupported }

// WriteBatch fails: Open never returns a Conn here.
func (c *Conn) WriteBatch(*Batch, int) (int, error) { return 0, ErrUnsupported }

// GRO reports false: there is no UDP_GRO here.
func (c *Conn) GRO() bool { return false }

// GROStats returns zero counters.
func (c *Conn) GROStats() GROStats { return GROStats{} }

// GSOStats returns zero counters.
func (c *Conn) GSOStats() GSOStats { return GSOStats{} }
