package impair

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"time"

	"github.com/mdbus/mdbus/internal/sock"
	"github.com/mdbus/mdbus/packetconn/impair"
)

// Relay defaults.
const (
	DefaultRelayInterface  = "lo"
	DefaultRelayBatch      = 32
	DefaultRelayReadBuffer = 4 << 20
	DefaultProgressEvery   = time.Second
	// relayBufSize fits any UDP datagram, so the relay never truncates.
	relayBufSize  = 1 << 16
	maxRelayBatch = 1024
)

// RelayConfig describes a Relay. In and Out are required.
//
// One rule for the values of every field, here and in Impair: the zero
// value means the default. No field has a "none": a negative value is
// invalid, and Relay returns an error wrapping impair.ErrInvalidConfig
// that names it.
type RelayConfig struct {
	// In is the group (and port) to join and read; Out the group (and
	// port) to send to. Both must be multicast and differ.
	In, Out netip.AddrPort
	// Interface joins In and sends to Out. Default "lo"; IPv6 groups need
	// a real (or veth) interface, since IPv6 multicast does not work over
	// lo on Linux.
	Interface string
	// Source, when valid, is the local address the relay sends from (for
	// example 127.0.0.2, to tell its traffic apart); default the
	// wildcard address.
	Source netip.Addr
	// TTL is the multicast TTL (hop limit) of what the relay sends.
	// Default 0: nothing leaves the host.
	TTL int
	// Impair is applied to the forwarded datagrams on the sending side
	// (Sender), so every subscriber of Out sees the same impairment. Its
	// PCG stream is Impair.Stream.
	Impair impair.Config
	// Batch is how many datagrams one read takes. Default 32.
	Batch int
	// ReadBuffer is the SO_RCVBUF request of the In socket. Default 4 MiB.
	ReadBuffer int
	// Ready, when set, is called once the group is joined and the relay
	// is about to read.
	Ready func()
	// Progress, when set, is called with the stats so far about every
	// ProgressEvery (default 1s), on Relay's goroutine.
	Progress      func(RelayStats)
	ProgressEvery time.Duration
}

// RelayStats counts what a Relay did.
type RelayStats struct {
	// Received counts datagrams read from In.
	Received uint64
	// Foreign counts datagrams for another group on In's port, ignored.
	Foreign uint64
	// Impair is the sending side's impairment: Impair.Seen datagrams were
	// forwarded into it, Impair.Out sent to Out.
	Impair impair.Stats
}

func (c RelayConfig) withDefaults() (RelayConfig, error) {
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("%w: relay: "+format, append([]any{impair.ErrInvalidConfig}, args...)...))
	}
	for _, a := range []struct {
		name string
		ap   netip.AddrPort
	}{{"In", c.In}, {"Out", c.Out}} {
		if !a.ap.IsValid() || !a.ap.Addr().IsMulticast() || a.ap.Port() == 0 {
			bad("%s %v is not a multicast group with a port", a.name, a.ap)
		}
	}
	if c.In.IsValid() && sock.Unmap(c.In) == sock.Unmap(c.Out) {
		bad("In and Out are the same group %v: the relay would feed itself", c.In)
	}
	if c.TTL < 0 || c.TTL > 255 {
		bad("TTL %d not in [0,255]", c.TTL)
	}
	if c.Batch < 0 || c.Batch > maxRelayBatch {
		bad("Batch %d not in [0,%d]", c.Batch, maxRelayBatch)
	}
	if c.ReadBuffer < 0 {
		bad("ReadBuffer %d is negative", c.ReadBuffer)
	}
	if c.ProgressEvery < 0 {
		bad("ProgressEvery %v is negative", c.ProgressEvery)
	}
	if err := c.Impair.Validate(); err != nil {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return c, err
	}
	if c.Interface == "" {
		c.Interface = DefaultRelayInterface
	}
	if c.Batch == 0 {
		c.Batch = DefaultRelayBatch
	}
	if c.ReadBuffer == 0 {
		c.ReadBuffer = DefaultRelayReadBuffer
	}
	if c.ProgressEvery == 0 {
		c.ProgressEvery = DefaultProgressEvery
	}
	return c, nil
}

func wildcard(a netip.Addr) netip.Addr {
	if a.Is4() || a.Is4In6() {
		return netip.IPv4Unspecified()
	}
	return netip.IPv6Unspecified()
}

// Relay joins cfg.In on cfg.Interface and forwards every datagram of that
// group, through a Sender impairment, to cfg.Out, until ctx is done. It
// then sends what the impairment still holds, closes its sockets and
// returns the stats with a nil error; any other error ends it early (the
// stats so far are returned with it). Datagrams arriving for another group
// on the same port are not forwarded.
func Relay(ctx context.Context, cfg RelayConfig) (RelayStats, error) {
	var st RelayStats
	cfg, err := cfg.withDefaults()
	if err != nil {
		return st, err
	}
	ifi, err := net.InterfaceByName(cfg.Interface)
	if err != nil {
		return st, fmt.Errorf("impair: relay: interface %q: %w", cfg.Interface, err)
	}
	in := sock.Unmap(cfg.In)
	rx, err := sock.Open(sock.Config{
		Local:      netip.AddrPortFrom(wildcard(in.Addr()), in.Port()),
		ReusePort:  true,
		ReadBuffer: cfg.ReadBuffer,
	})
	if err != nil {
		return st, fmt.Errorf("impair: relay: %w", err)
	}
	defer rx.Close()
	if err := rx.Join(ifi, in.Addr(), netip.Addr{}); err != nil {
		return st, fmt.Errorf("impair: relay: %w", err)
	}
	src := cfg.Source
	if !src.IsValid() {
		src = wildcard(cfg.Out.Addr())
	}
	tx, err := sock.Open(sock.Config{Local: netip.AddrPortFrom(src, 0), Interface: ifi, TTL: cfg.TTL, Loopback: true, SendOnly: true})
	if err != nil {
		return st, fmt.Errorf("impair: relay: %w", err)
	}
	out, err := impair.NewSender(tx, cfg.Impair)
	if err != nil {
		tx.Close()
		return st, err
	}
	err = relayLoop(ctx, cfg, in, rx, out, &st)
	if cerr := out.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("impair: relay: %w", cerr)
	}
	st.Impair = out.Stats()
	return st, err
}

func relayLoop(ctx context.Context, cfg RelayConfig, in netip.AddrPort, rx *sock.Conn, out *impair.Conn, st *RelayStats) error {
	// Cancelling ctx unblocks the read. dmu orders that against the
	// loop's own deadline for progress reports, so a late progress
	// deadline never hides the cancellation.
	var (
		dmu     sync.Mutex
		stopped bool
		fired   = make(chan struct{})
	)
	stop := context.AfterFunc(ctx, func() {
		defer close(fired)
		dmu.Lock()
		defer dmu.Unlock()
		stopped = true
		_ = rx.SetReadDeadline(time.Unix(1, 0))
	})
	defer func() {
		if !stop() {
			<-fired
		}
	}()
	setDeadline := func(t time.Time) {
		dmu.Lock()
		defer dmu.Unlock()
		if !stopped {
			_ = rx.SetReadDeadline(t)
		}
	}

	rb := sock.NewBatch(cfg.Batch, relayBufSize)
	ob := sock.NewBatch(cfg.Batch, 0)
	next := time.Now().Add(cfg.ProgressEvery)
	if cfg.Ready != nil {
		cfg.Ready()
	}
	for ctx.Err() == nil {
		if cfg.Progress != nil {
			if now := time.Now(); !now.Before(next) {
				st.Impair = out.Stats()
				cfg.Progress(*st)
				next = now.Add(cfg.ProgressEvery)
			}
			setDeadline(next)
		}
		n, err := rx.ReadBatch(rb)
		if err != nil {
			if sock.IsTimeout(err) {
				continue
			}
			return fmt.Errorf("impair: relay: receive on %s: %w", cfg.In, err)
		}
		st.Received += uint64(n)
		k := 0
		for i := range n {
			m := &rb.Msgs[i]
			if m.Dst.IsValid() && m.Dst.Unmap() != in.Addr() {
				st.Foreign++
				continue
			}
			ob.Msgs[k].Buf, ob.Msgs[k].Addr = m.Buf, cfg.Out
			k++
		}
		if k > 0 {
			if _, err := out.WriteBatch(ob, k); err != nil {
				return fmt.Errorf("impair: relay: send to %s: %w", cfg.Out, err)
			}
		}
	}
	return nil
}
