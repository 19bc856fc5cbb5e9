package subscriber

import (
	"cmp"
	"fmt"
	"net/netip"
	"slices"
	"time"

	"github.com/mdbus/mdbus/internal/monotime"
	"github.com/mdbus/mdbus/nak"
)

// MaxBackups bounds Config.Recovery.Backups: every repair datagram is checked
// against the list, and a feed has a primary and a backup retransmitter,
// seldom more.
const MaxBackups = 7

// asker chooses the retransmitter re-requests go to: Config.Recovery.Retransmitter
// first, then, when the one asked has not answered for Config.Recovery.Failover
// while being asked, the next of Config.Recovery.Backups, round robin. It is the
// core's (guarded by core.mu): the NAK timer asks target, the repair
// readers report what they heard.
//
// "Answered" means any trusted datagram from the one asked on the repair
// socket, or any on the repair group (whose source cannot be told apart:
// a retransmitter multicasts from a socket of its own). A retransmitter
// that is up but no longer holds a range sends nothing for it, and is
// left as well: a backup (a journal-backed rewinder) may hold more.
type asker struct {
	addrs []netip.AddrPort // Retransmitter, then Backups
	cur   int              // index in addrs of the one asked now
	after time.Duration    // Config.Failover
	// quiet is a pause between re-requests after which they start a new
	// run: no gap outlives the NAK deadline, so the runs are unrelated.
	quiet time.Duration

	waiting  bool          // re-requests to addrs[cur] are unanswered since asked
	asked    monotime.Time // the first of them
	last     monotime.Time // the latest re-request sent
	answered monotime.Time // the latest answer from addrs[cur]
	heard    bool          // answered is set
	switches uint64        // failovers so far
}

// target returns the retransmitter the re-requests due at now go to
// (asking: there are some) and whether it just replaced the one asked
// before, which had not answered for a.after.
func (a *asker) target(now monotime.Time, asking bool) (to netip.AddrPort, switched bool) {
	if asking && len(a.addrs) > 1 {
		switch {
		case !a.waiting || (a.heard && a.answered >= a.asked) || now.Sub(a.last) >= a.quiet:
			a.waiting, a.asked = true, now
		case now.Sub(a.asked) >= a.after:
			a.cur = (a.cur + 1) % len(a.addrs)
			a.asked, a.heard = now, false
			a.switches++
			switched = true
		}
		a.last = now
	}
	return a.addrs[a.cur], switched
}

// trusts reports whether src is one of the retransmitters, noting an
// answer when it is the one asked.
func (a *asker) trusts(src netip.AddrPort, now monotime.Time) bool {
	for i, r := range a.addrs {
		if r == src {
			if i == a.cur {
				a.hear(now)
			}
			return true
		}
	}
	return false
}

// hear notes an answer from the one asked at now.
func (a *asker) hear(now monotime.Time) { a.answered, a.heard = now, true }

// backups checks Backups and Failover and applies Failover's default.
// Backups is copied before its addresses are unmapped: the caller's
// slice is left alone.
func (c *Config) backups() error {
	if c.Recovery.Failover < 0 {
		return fmt.Errorf("%w: failover %v: want a positive duration (0: the default)", ErrConfig, c.Recovery.Failover)
	}
	if c.Recovery.Failover == 0 {
		c.Recovery.Failover = 5 * cmp.Or(c.Recovery.NAK.Retry, nak.DefaultRetry)
	}
	if len(c.Recovery.Backups) == 0 {
		return nil
	}
	switch {
	case !c.Recovery.Retransmitter.IsValid():
		return fmt.Errorf("%w: backup retransmitters without a Retransmitter: set the first one asked as Retransmitter", ErrConfig)
	case len(c.Recovery.Backups) > MaxBackups:
		return fmt.Errorf("%w: %d backup retransmitters: at most %d", ErrConfig, len(c.Recovery.Backups), MaxBackups)
	}
	c.Recovery.Backups = slices.Clone(c.Recovery.Backups)
	for i, b := range c.Recovery.Backups {
		b = netip.AddrPortFrom(b.Addr().Unmap(), b.Port())
		switch a := b.Addr(); {
		case !b.IsValid() || a.IsMulticast() || a.IsUnspecified() || b.Port() == 0:
			return fmt.Errorf("%w: backup retransmitter %s: want a unicast address and a port", ErrConfig, b)
		case a.Is4() != c.Recovery.Retransmitter.Addr().Is4():
			return fmt.Errorf("%w: backup retransmitter %s: not of the Retransmitter's (%s) address family; re-requests leave from one socket", ErrConfig, b, c.Recovery.Retransmitter)
		case b == c.Recovery.Retransmitter || slices.Contains(c.Recovery.Backups[:i], b):
			return fmt.Errorf("%w: retransmitter %s listed twice", ErrConfig, b)
		}
		c.Recovery.Backups[i] = b
	}
	return nil
}

// asker is the core's failover state for c (c.withDefaults applied).
func (c Config) asker() asker {
	if !c.Recovery.Retransmitter.IsValid() {
		return asker{}
	}
	return asker{
		addrs: append([]netip.AddrPort{c.Recovery.Retransmitter}, c.Recovery.Backups...),
		after: c.Recovery.Failover,
		quiet: cmp.Or(c.Recovery.NAK.Deadline, nak.DefaultDeadline),
	}
}
