// Package recorder holds the long-running roles that sit above both sides
// of the bus: they subscribe to a feed (package subscriber), fill their own
// holes by re-request, keep what they hear in a cache (package retransmit)
// or a journal (package journal), and serve or replay it. The serving
// packages never import the client side; roles that need both live here.
//
// # Roles
//
//   - Rewinder caches a feed in memory (and optionally journals it) and
//     answers MoldUDP64 re-requests from the cache, then the journal, so
//     repairs outlive the publisher (mdbus rewind).
//   - Recorder journals every stream of a feed, one journal incarnation per
//     stream incarnation, stamped with the receive time (mdbus record).
//
// Both take an Upstream retransmitter (the publisher's re-request server
// or another rewinder): a range their own socket missed, a kernel drop
// after a stall for example, is asked for again, so the history they hold
// has no holes and one drop never discards what they already hold.
//
// # Usage
//
//	j, _ := journal.Open("/var/lib/mdbus", journal.Config{})
//	rec, _ := recorder.NewRecorder(recorder.Config{
//		Feed:     netip.MustParseAddrPort("239.192.0.1:31001"),
//		Upstream: netip.MustParseAddrPort("127.0.0.1:31100"),
//		Journal:  j,
//	})
//	defer j.Close()
//	defer rec.Close()
package recorder

import (
	"errors"
	"log/slog"
)

// Sentinel errors.
var (
	// ErrClosed is returned by a second Close.
	ErrClosed = errors.New("recorder: closed")
	// ErrConfig wraps every invalid configuration.
	ErrConfig = errors.New("recorder: invalid config")
)

var discard = slog.New(slog.DiscardHandler)

func orDiscard(l *slog.Logger) *slog.Logger {
	if l == nil {
		return discard
	}
	return l
}
