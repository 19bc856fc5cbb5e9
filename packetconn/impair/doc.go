// Package impair is the impairment layer of mdbus: a wrapper around
// sock.PacketConn that drops, duplicates, reorders and delays datagrams
// by seeded probabilities, plus exact drop rules ("drop the packets
// carrying sequences 98 to 100"). The kernel's tc netem and iptables are
// not available to the bus's tests, so the impairment is done here, in
// process, where a failing test can be replayed from its seed. The relay
// of tools/impair runs the same layer between two groups (the "mdbus
// impair" command), so a person can watch recovery with real binaries.
//
// # Sides
//
// Receiver impairs what ReadBatch returns; every wrapped receiver decides
// on its own, so loss is independent per subscriber. Sender impairs what
// WriteBatch and WriteTo send, before the network, so every subscriber of
// the group sees the same loss (correlated loss: one NAK, one multicast
// repair serves all). Both are wrap functions for the Wrap field of
// publisher, subscriber and retransmit configs:
//
//	var rx *impair.Conn
//	sub, err := subscriber.New(subscriber.Config{
//		Group: group,
//		Wrap:  impair.Receiver(impair.Config{Loss: 0.01, Reorder: 0.01, Seed: 7, OnWrap: func(c *impair.Conn) { rx = c }}),
//	})
//	...
//	t.Logf("impairment: %+v", rx.Stats())
//
// # Pipeline
//
// Every datagram goes through the same stages on both sides:
//
//	          +-----------+   +------+   +-----------+   +--------------+   +--------------+
//	datagram->| Drop rule |-->| Loss |-->| Duplicate |-->| Reorder      |-->| Delay        |--> out
//	          | (exact)   |   | p    |   | p: 2nd    |   | p: hold for  |   | Delay +      |
//	          +-----------+   +------+   | copy      |   | Depth later  |   | U[0,Jitter)  |
//	                                     +-----------+   | or Wait      |   +--------------+
//	                                                     +--------------+
//
// The stages:
//
//   - Drop rule (Config.Drop) runs first on every datagram; DropSeqs,
//     DropRange, DropHeartbeats and AnyOf build rules from the MoldUDP64
//     header alone. A rule drops whole datagrams: a packet carrying any
//     listed sequence goes.
//   - Loss drops a datagram with probability Loss.
//   - Duplicate makes a second copy with probability Duplicate. The copy
//     follows the original and takes its own reorder and delay decisions,
//     so with Reorder or Jitter it can arrive far from the original.
//   - Reorder holds a copy with probability Reorder until ReorderDepth
//     later copies have entered this stage (it then leaves right after the
//     last of them), or until ReorderWait (default 10 ms) has passed, so a
//     tail datagram is released even when no traffic follows.
//   - Delay holds each copy for Delay plus a uniform random [0, Jitter).
//     Copies leave in order of release time (ties in order of entry), so
//     jitter larger than the gap between datagrams reorders them too. A
//     reordered copy's delay counts from when it leaves the reorder stage.
//
// With OnlyData, datagrams that are not data packets (see IsData:
// heartbeats, end of session, re-requests, anything else) skip Loss to
// Delay and pass at once; the Drop rule still applies.
//
// On the receiving side a dropped datagram vanishes from the batch;
// duplicates and released datagrams are copied into the caller's batch
// in order, and what does not fit waits for the next ReadBatch (which then
// returns it without reading). On the sending side the surviving copies of
// a WriteBatch are sent in one or more inner WriteBatch calls before it
// returns; held ones are sent later by the Sender's goroutine when they
// fall due, whether or not another WriteBatch comes.
//
// # Determinism
//
// Decisions come from a math/rand/v2 PCG generator seeded from Seed and
// the stream (Config.Stream, plus n for the n-th connection one wrap
// function wraps). Every impaired datagram consumes exactly six draws
// (loss, duplicate, and reorder and jitter for each of the two copies)
// whatever is decided, also when the Drop rule drops it, so the decisions
// for the i-th datagram depend only on the seed, the stream and i: same
// seed and same sequence of datagrams, same drops, duplicates and reorder
// choices, and changing one probability does not shift the others.
// Datagrams OnlyData exempts consume no draws, so heartbeat timing does
// not shift decisions on data. What is timing-dependent is only when a
// reordered copy is released by ReorderWait instead of by depth, and the
// delay stage, whose release times come from the clock.
//
// # Bounds
//
// At most MaxHeld (default 1024) copies are held (reordered and delayed
// together). When one more must be held, the held copy due soonest is
// released at once, skipping what is left of its wait or delay, and counted
// in Stats.Forced. Slots are allocated once and their buffers on first use
// and kept, so the steady state allocates nothing per datagram. Nothing is
// held longer than ReorderWait plus Delay plus Jitter (each bounded by
// MaxDelay) unless the conn is not read (Receiver) or is closed. A Sender's
// Close sends everything still held at once; a Receiver's Close discards
// it.
//
// # Receiver deadlines
//
// A Receiver keeps the caller's read deadline (SetReadDeadline) itself and
// gives the inner conn the earlier of it and the time the next held
// datagram is due, both before each inner read and whenever the caller
// sets a new deadline during one (from any goroutine, as Close paths do).
// ReadBatch:
//
//  1. returns at once what is ready: datagrams left over from the last
//     call, and held ones whose time has come, without looking at the
//     deadline;
//  2. otherwise reads the inner conn. When that read times out, it
//     releases what is due by then (the wrapper's own bound, or a late
//     wake-up past both) and returns it; only when nothing is due and the
//     caller's deadline has passed does it return the inner conn's timeout
//     error (sock.IsTimeout holds), as an unwrapped socket would. A read
//     that yields nothing to deliver (all dropped or held) reads again
//     under the same rules.
//
// So a ReadBatch with held datagrams never blocks past the time the first
// of them is due, and the caller's deadline means what it means on a
// socket. Between ReadBatch calls the inner conn may still carry the
// wrapper's earlier bound until the caller sets a deadline; every
// ReadBatch sets it afresh. The inner conn's deadline is the wrapper's
// business while it is wrapped: read it only through the wrapper.
//
// # Buffers
//
// A Receiver reads into its own batch, sized from the caller's (number of
// messages, largest buffer capacity), and copies each datagram into the
// caller's b.Msgs[i].Buf up to its capacity, setting Truncated when it does
// not fit; the data is the caller's, valid until it reuses the batch, as
// with a socket. b.Drops is the inner batch's kernel drop count. Held
// datagrams are copies in wrapper-owned slots. A Sender copies only the
// datagrams it holds; it does not keep the caller's buffers after
// WriteBatch or WriteTo returns.
//
// # Concurrency
//
// A Conn follows sock.PacketConn: ReadBatch must not run concurrently with
// itself, nor WriteBatch/WriteTo with themselves; one reader and one writer
// may run at once. A Sender serializes its writes (and its goroutine's)
// with a mutex, so its WriteBatch and WriteTo may in fact be called from
// several goroutines. SetReadDeadline, Stats and Close are safe at any
// time. Close stops the Sender's goroutine and waits for it; a second Close
// returns ErrClosed, as do reads and writes after Close. Drop rules must be
// safe to call from the goroutines that read or write.
package impair
