// Package nak decides when a subscriber asks for missing messages again: it
// keeps the set of missing sequence ranges of one stream (the gap set),
// schedules a NAK (a MoldUDP64 re-request) for each after a short random
// delay, retries with exponential backoff, gives up at a deadline, and
// cancels whatever arrives meanwhile, from the live feed or as a repair.
//
// The package is pure logic. It owns no socket and starts no goroutine; the
// caller passes the time (internal/monotime, int64 nanoseconds) into every
// call, so tests drive it with plain values. The model is the NAK state
// machine of PGM (RFC 3208: random NAK back-off NAK_BO_IVL, repeats, and
// giving up after NAK_NCF_RETRIES / NAK_DATA_RETRIES as unrecoverable loss)
// and NORM (RFC 5740: random NACK back-off with suppression, repair
// cycles), and the roles follow Aeron: its LossDetector (onGap) and
// FeedbackDelayGenerator become LossDetector and DelayGenerator here.
// Unlike Aeron's LossDetector, which chases one gap at a time and retries
// forever, this one tracks every gap of the stream at once and has a
// give-up deadline.
//
// # Timing rules
//
// A gap [From, To) first seen at t (OnGap) is asked for at t+d, where d is
// drawn once per gap from the DelayGenerator (by default uniform in
// [0, Delay)). After each NAK, while any of it is still missing, it is asked
// again after Retry, then 2·Retry, 4·Retry, ... capped at MaxRetry. Once
// now >= t+Deadline, what is left is returned by Poll as lost and forgotten.
// A range that had to wait for room in the Window has no deadline while it
// waits, and its Deadline counts from its first NAK: a long gap asked a
// window at a time is not given up for the subscriber's own pacing.
//
//	t              t+d          t+d+R          t+d+3R                                              t+Deadline
//	|<-U[0,Delay)->|<--- R ---->|<---- 2R ---->|<-- NAK 4, 5, ... after 4R, 8R, ... <= MaxRetry -->|
//	OnGap          NAK 1        NAK 2          NAK 3                                               lost (Poll)
//	R = Retry. A fill before NAK 1 cancels it (Stats.Suppressed).
//
// Ranges reported by OnGap that are already tracked keep their timers; only
// the new parts start a new gap. OnReceived removes the messages it covers:
// a fully filled range is cancelled, and a partly filled one is split, each
// piece keeping the timers of the whole (it is still the same loss event,
// so no piece is given more time). A retry is sent early in one case only:
// when repairs fill messages already asked for (but not strictly inside
// one range: an answer starts where its request starts) and the ranges
// asked for right after them are still missing, the answer was partial,
// not lost (a MoldUDP64 server answers a request with at most one
// packet, and a request joins adjacent ranges), so those ranges, up to
// MaxRequest messages, are asked for together once no repair has come
// for Continue (1 ms) plus one delay drawn as for a new gap (suppression
// again), instead of after the backoff interval, and their backoff starts
// again at Retry. Otherwise every message is asked for again only after
// its current backoff interval has elapsed since the previous request.
//
// Poll(now) returns the re-requests due now, split into ranges of at most
// MaxRequest messages (MaxRequest <= wire.MaxCount, one MoldUDP64 request
// each) and joined when adjacent ranges fall due together, plus the ranges
// given up. Next tells the caller when to call Poll again; Poll before then
// is cheap and does nothing.
//
// # Suppression that scales with the group
//
// A NAK that no other receiver hears suppresses nothing, and a fixed
// random delay suppresses well only for the group size and round trip it
// was chosen for (a uniform 0-2 ms wait let 8-10 of 32 subscribers that
// missed the same packet ask for it). Two mechanisms make one NAK serve
// the group, after PGM (RFC 3208) and NORM (RFC 5740):
//
//   - The retransmitter confirms requests on the repair group
//     (wire.Confirm, PGM's NCF), and OnConfirm records them: a receiver
//     that has not asked yet does not ask, and one that has waits for the
//     answer instead of retrying. Every request it holds back (behind a
//     rate limit, or for messages it has not received yet) is confirmed
//     "later", with the wait, which postpones the retry so a busy
//     retransmitter is not hammered. A request answered at once is
//     confirmed only now and then (at most one "sending" confirm per 10
//     ms, to carry the group size): its multicast repair follows within
//     microseconds and suppresses as well as a confirm would, and a
//     confirm per repair doubled the packets every subscriber reads
//     under loss (3 subscribers at 5% loss and 200k msgs/s fell 100 ms
//     behind on two cores with it, not without).
//   - GroupBackoff draws the first NAK's delay from NORM's truncated
//     exponential distribution over a window sized by the group (the
//     retransmitter's count of its requesters, carried in its confirms),
//     by the share of the group's repairs that fill this receiver's own
//     losses, and by the measured repair round trip; see its documentation. A
//     subscriber uses it unless its configuration sets Delay or
//     Generator. A group of one waits not at all.
//
// # Requests sized to answers, and a window
//
// A MoldUDP64 server answers a request with one packet. SetMaxRequest
// sizes requests to what one packet holds (the subscriber estimates it
// from the feed's message sizes), so each is answered whole, and a long
// gap is asked as several requests in flight rather than one request
// answered a packet per round trip. Config.Window bounds what is in
// flight (256 requests by default): the rest of a long gap is asked as
// answers make room. Each tracked range is asked in one request of its
// own, so that an answer that fills a request is told from a partial
// answer, whose rest is asked at once (Continue).
//
// # Defaults for a LAN
//
// mdbus runs on a LAN where a round trip to the retransmitter costs tens to
// a few hundred microseconds, while receivers may be many. For reference,
// Aeron draws the multicast NAK delay from [0, 10 ms) and uses a fixed
// 100 µs for unicast, with unicast retries 100 times that (10 ms); OpenPGM
// waits a random back-off of up to 50 ms (NAK_BO_IVL) before its first NAK;
// NASDAQ-style MoldUDP64 clients re-request after about 1 s without
// progress.
//
//   - Delay 2 ms (uniform in [0, 2 ms), mean 1 ms). The delay exists for two
//     reasons, both of which need only a few LAN round trips: a gap is often
//     just reordering, or an A/B partner feed a little behind, and the
//     missing packet turns up within microseconds to a millisecond; and when
//     many receivers miss the same packet, the first NAK's repair on the
//     repair group reaches the others before their own timers expire
//     (suppression, RFC 5740). With a repair round trip r of about 0.2 ms,
//     N receivers send roughly 1+N·r/Delay NAKs instead of N (about 2
//     instead of 10 for ten receivers). 2 ms is ten such round trips, keeps
//     the mean added recovery latency at 1 ms, and sits well below Aeron's
//     10 ms and OpenPGM's 50 ms, which are sized for wider networks. The
//     retransmitter also coalesces duplicate requests, so a larger window
//     would buy little. A unicast-only session (no repair group, one
//     feed) gains nothing from the wait: package subscriber then uses
//     FixedDelay(100 µs), as Aeron does.
//   - Retry 10 ms, doubling to MaxRetry 100 ms. A retry must not fire while
//     a working repair is on its way, or it doubles the repair traffic: 10 ms
//     is 50-100 LAN round trips, enough for a retransmitter that paces a
//     1024-message answer or rate-limits requesters, and equals Aeron's
//     unicast retry (100 µs × 100). Doubling to 100 ms keeps a stalled or
//     restarting retransmitter from receiving more than about ten requests a
//     second per range: repeats back off instead of hammering a sender that
//     is already behind.
//   - Deadline 1 s. At the defaults a range is asked for about a dozen times
//     before it is given up. Market data older than a second is stale to a
//     trading application, which should then recover from a snapshot or the
//     journal rather than wait; it matches the 1 s a NASDAQ-style client
//     waits before re-requesting, so a retransmitter that is merely slow has
//     had more than a full client cycle to answer. The subscriber's hold
//     buffer must cover Deadline times the message rate, or it gives up first.
//   - MaxRequest 1024 messages. One answer is then at most a few dozen
//     MTU-sized packets, a burst a receive socket buffer absorbs, and a
//     retransmitter's per-request cost stays small; larger gaps become
//     several requests sent together.
//   - MaxPending 65536 messages per stream: tens of milliseconds of a busy
//     feed, several seconds of a typical one, beyond which a retransmit cache
//     cannot be expected to hold the data and a journal replay is the right
//     tool. It also bounds the memory (one 48-byte entry per range, at most
//     MaxPending of them: 3 MiB) and the work one Poll can return (requests
//     totalling at most MaxPending messages).
//
// # Bounded gaps
//
// A heartbeat or packet claiming a sequence far ahead (2^40, say, from a
// corrupt or hostile sender) must not make a subscriber ask for 2^40
// messages. The rule: when the messages a gap adds to the set would take
// Pending above MaxPending, the whole new part of that gap is declared lost
// at once. It is never requested; the next Poll returns it as lost (Next
// reports it due immediately) unless OnReceived fills some of it first, and
// Stats.Overflows counts it. Pending therefore never exceeds MaxPending,
// and the requests outstanding never total more than MaxPending messages.
// The rule judges the new part of each gap: a later heartbeat a few
// sequences beyond an absurd one adds a small gap that is tracked as usual.
// Deciding that a session is suspect (dropping it, waiting for a plausible
// packet) is the subscriber's business; it can call GiveUp to drop the
// whole set at once.
//
// # Concurrency and memory
//
// A LossDetector is per stream and not safe for concurrent use: the
// goroutine that owns the stream calls all its methods. It keeps the gap
// set in one sorted slice of ranges, reused for the detector's life; OnGap,
// OnReceived and Poll do not allocate once that slice has grown to the
// number of ranges in flight. Poll and GiveUp append to caller-owned slices
// and keep no reference to them. DelayGenerator implementations in this
// package are not safe for concurrent use either; give each detector its
// own.
//
// # Usage
//
//	d := nak.NewLossDetector(nak.Config{}) // LAN defaults
//	var reqs, lost []nak.Range
//	// on a packet whose first sequence is beyond the next expected one:
//	d.OnGap(now, nak.Range{From: expected, To: first})
//	// on every packet or repair carrying [seq, seq+count):
//	filled, age := d.OnReceived(now, nak.Range{From: seq, To: seq + count})
//	// whenever now reaches d.Next():
//	reqs, lost = d.Poll(now, reqs[:0], lost[:0])
//	for _, r := range reqs { /* send wire.Request{Seq: r.From, Count: uint16(r.Len())} */ }
//	for _, r := range lost { /* report the loss of r to the application */ }
package nak
