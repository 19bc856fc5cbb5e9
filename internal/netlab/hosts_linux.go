//go:build linux

package netlab

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"runtime"
	"sync"

	"golang.org/x/sys/unix"
)

var (
	bridgeOnce sync.Once
	bridgeErr  error
	hostsMu    sync.Mutex
	hosts      int
)

// NewHost makes a host of the lab named name (a few letters). It refuses
// to run outside the lab. Close removes it.
func NewHost(name string) (*Host, error) {
	if !Inside() {
		return nil, errors.New("netlab: refusing to make a host outside the lab")
	}
	bridgeOnce.Do(func() {
		bridgeErr = ipAll(
			[]string{"link", "add", Bridge, "type", "bridge", "mcast_snooping", "0"},
			[]string{"link", "set", Bridge, "up"},
		)
	})
	if bridgeErr != nil {
		return nil, bridgeErr
	}
	hostsMu.Lock()
	hosts++
	n := hosts
	hostsMu.Unlock()
	if n > 250 {
		return nil, errors.New("netlab: too many hosts")
	}
	h := &Host{
		Name: name,
		IPv4: netip.AddrFrom4([4]byte{10, 78, 0, byte(n)}),
		IPv6: netip.MustParseAddr(fmt.Sprintf("fd78::%x", n)),
		Port: fmt.Sprintf("mdbh%d", n),
	}
	// The pair is made here, in the lab namespace (this goroutine is not
	// locked, so its thread never left it); one end then moves into the
	// new namespace, named by the thread that made it.
	tmp := fmt.Sprintf("mdbt%d", n)
	if err := ipAll(
		[]string{"link", "add", h.Port, "type", "veth", "peer", "name", tmp},
		[]string{"link", "set", h.Port, "master", Bridge},
		[]string{"link", "set", h.Port, "up"},
	); err != nil {
		return nil, err
	}
	tidc, moved, errc := make(chan int, 1), make(chan error, 1), make(chan error, 1)
	go func() {
		// This thread enters the new namespace and is never unlocked, so
		// it ends with the goroutine instead of returning to the pool.
		runtime.LockOSThread()
		if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
			tidc <- 0
			errc <- fmt.Errorf("netlab: host %s: unshare: %w", name, err)
			return
		}
		ns, err := os.Open("/proc/thread-self/ns/net")
		if err != nil {
			tidc <- 0
			errc <- fmt.Errorf("netlab: host %s: %w", name, err)
			return
		}
		h.ns = ns
		tidc <- unix.Gettid()
		if err := <-moved; err != nil {
			errc <- err
			return
		}
		if err := ipAll(
			[]string{"link", "set", "lo", "up"},
			[]string{"link", "set", tmp, "name", HostLink},
			[]string{"addr", "add", h.IPv4.String() + "/24", "dev", HostLink},
			[]string{"-6", "addr", "add", h.IPv6.String() + "/64", "dev", HostLink, "nodad"},
			[]string{"link", "set", HostLink, "up"},
			[]string{"route", "add", "224.0.0.0/4", "dev", HostLink},
		); err != nil {
			errc <- err
			return
		}
		errc <- waitMulticastRoute6(HostLink)
	}()
	if tid := <-tidc; tid != 0 {
		moved <- ipAll([]string{"link", "set", tmp, "netns", fmt.Sprint(tid)})
	}
	if err := <-errc; err != nil {
		h.Close()
		return nil, err
	}
	return h, nil
}

// Do runs f in the host's namespace, on a thread of its own that is
// discarded afterwards: sockets f opens, and interfaces it looks up,
// are the host's. f must not leave goroutines that expect the host's
// namespace (new goroutines run in the lab's).
func (h *Host) Do(f func()) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread dies with the goroutine
		if err := unix.Setns(int(h.ns.Fd()), unix.CLONE_NEWNET); err != nil {
			errc <- fmt.Errorf("netlab: host %s: setns: %w", h.Name, err)
			return
		}
		defer func() { errc <- nil }()
		f()
	}()
	return <-errc
}

// SetLink takes the host's link to the bridge down or up (the bridge's
// side: the host sees its carrier go).
func (h *Host) SetLink(up bool) error {
	state := "down"
	if up {
		state = "up"
	}
	return ipAll([]string{"link", "set", h.Port, state})
}

// Close deletes the host's link and lets its namespace go.
func (h *Host) Close() error {
	err := ipAll([]string{"link", "del", h.Port}) // takes the host's end with it
	if h.ns != nil {
		h.ns.Close()
	}
	return err
}
