package subscriber

import (
	"errors"
	"fmt"
	"net/netip"
	"time"

	"github.com/mdbus/mdbus/nak"
	"github.com/mdbus/mdbus/wire"
)

// DropReason says why a datagram was dropped. Every drop is counted by
// reason in Stats.Drops.
type DropReason uint8

// Drop reasons. The values index Stats.Drops; new reasons are added before
// NumDropReasons.
const (
	// DropTruncatedDatagram: the datagram was larger than the receive
	// buffer (Config.Receive.DatagramSize) and the kernel cut it.
	DropTruncatedDatagram DropReason = iota
	// DropWrongGroup: the datagram was addressed to another group (or to a
	// unicast address) but reached the wildcard-bound socket.
	DropWrongGroup
	// DropWrongSource: Config.Source is set and the datagram came from
	// another address.
	DropWrongSource
	// DropShortHeader: fewer than the 20 bytes of a MoldUDP64 header
	// (wire.ErrShortHeader).
	DropShortHeader
	// DropTruncated: a message length runs past the end of the datagram
	// (wire.ErrTruncatedMessage).
	DropTruncated
	// DropTrailingBytes: bytes remain after the counted messages, the count
	// disagrees with the bytes (wire.ErrTrailingBytes).
	DropTrailingBytes
	// DropEndOfSessionData: a count of 0xFFFF with bytes after the header
	// (wire.ErrEndOfSessionData).
	DropEndOfSessionData
	// DropHeartbeatData: a count of 0 with bytes after the header
	// (wire.ErrHeartbeatData).
	DropHeartbeatData
	// DropZeroSeq: a packet, heartbeat or end of session naming sequence 0
	// (wire.ErrZeroSeq).
	DropZeroSeq
	// DropSeqOverflow: sequence plus count passes 2^64-1
	// (wire.ErrSeqOverflow).
	DropSeqOverflow
	// DropBadSession: the session is not printable ASCII
	// (wire.ErrBadSession).
	DropBadSession
	// DropMalformed: any other decoding error.
	DropMalformed
	// DropTooManyStreams: the packet would start a stream beyond
	// Config.Limits.MaxStreams and no ended or superseded stream could be evicted.
	DropTooManyStreams
	// DropSeqJump: the packet, heartbeat or end of session is more than
	// Config.Limits.MaxGap messages ahead of the next expected sequence.
	DropSeqJump
	// DropReorderFull: the packet is ahead of the next expected sequence
	// and its stream's reorder buffer already holds Config.Receive.ReorderPackets
	// packets. Its messages are reported as a gap.
	DropReorderFull
	// DropDuplicate: every message of the packet was delivered already (or
	// precedes Config.StartSeq), or it repeats a packet held for reordering.
	DropDuplicate
	// DropAfterEnd: the packet or heartbeat reaches past the end of session.
	DropAfterEnd
	// DropBadEndOfSession: an end of session below what was delivered, or
	// disagreeing with an earlier one.
	DropBadEndOfSession
	// DropUnknownRepair: a repair packet for a session no stream has.
	DropUnknownRepair
	// DropStopped: a packet of a stream stopped by LossStop.
	DropStopped
	// DropUntrustedRepair: a datagram on the unicast repair socket from
	// another address and port than Config.Recovery.Retransmitter (or its Backups;
	// with Config.Recovery.RetransmitPort, than that port at the address of the
	// stream it names), or on the repair group from another address than
	// Config.Recovery.RepairSource. It is dropped before it is counted or used.
	DropUntrustedRepair
	// NumDropReasons is the number of drop reasons (the length of
	// Stats.Drops).
	NumDropReasons
)

var dropNames = [NumDropReasons]string{
	DropTruncatedDatagram: "truncated-datagram",
	DropWrongGroup:        "wrong-group",
	DropWrongSource:       "wrong-source",
	DropShortHeader:       "short-header",
	DropTruncated:         "truncated-message",
	DropTrailingBytes:     "trailing-bytes",
	DropEndOfSessionData:  "end-of-session-data",
	DropHeartbeatData:     "heartbeat-data",
	DropZeroSeq:           "zero-seq",
	DropSeqOverflow:       "seq-overflow",
	DropBadSession:        "bad-session",
	DropMalformed:         "malformed",
	DropTooManyStreams:    "too-many-streams",
	DropSeqJump:           "seq-jump",
	DropReorderFull:       "reorder-full",
	DropDuplicate:         "duplicate",
	DropAfterEnd:          "after-end",
	DropBadEndOfSession:   "bad-end-of-session",
	DropUnknownRepair:     "unknown-repair",
	DropStopped:           "stopped",
	DropUntrustedRepair:   "untrusted-repair",
}

// String returns a short, stable, lower-case name for r, for logs and
// metrics.
func (r DropReason) String() string {
	if r < NumDropReasons {
		return dropNames[r]
	}
	return "unknown"
}

// dropReasonOf maps a wire decoding error to its drop reason.
func dropReasonOf(err error) DropReason {
	switch {
	case errors.Is(err, wire.ErrShortHeader):
		return DropShortHeader
	case errors.Is(err, wire.ErrTruncatedMessage):
		return DropTruncated
	case errors.Is(err, wire.ErrTrailingBytes):
		return DropTrailingBytes
	case errors.Is(err, wire.ErrEndOfSessionData):
		return DropEndOfSessionData
	case errors.Is(err, wire.ErrHeartbeatData):
		return DropHeartbeatData
	case errors.Is(err, wire.ErrZeroSeq):
		return DropZeroSeq
	case errors.Is(err, wire.ErrSeqOverflow):
		return DropSeqOverflow
	case errors.Is(err, wire.ErrBadSession):
		return DropBadSession
	}
	return DropMalformed
}

// Feed names the socket a datagram arrived on.
type Feed uint8

// Feeds. The values index Stats.FeedDatagrams and Stats.FeedMessages.
const (
	// FeedPrimary is the feed group (Config.Group).
	FeedPrimary Feed = iota
	// FeedSecondary is the A/B partner feed (Config.Secondary).
	FeedSecondary
	// FeedRepair is the unicast repair socket (answers from
	// Config.Recovery.Retransmitter).
	FeedRepair
	// FeedRepairGroup is the multicast repair group (Config.Recovery.RepairGroup).
	FeedRepairGroup
	// NumFeeds is the number of feeds.
	NumFeeds
)

var feedNames = [NumFeeds]string{"primary", "secondary", "repair", "repair-group"}

// String returns "primary", "secondary", "repair" or "repair-group".
func (f Feed) String() string {
	if f < NumFeeds {
		return feedNames[f]
	}
	return fmt.Sprintf("Feed(%d)", uint8(f))
}

// Stats are a subscriber's counters since New. Message counts are in
// messages (sequence numbers), packet counts in datagrams.
type Stats struct {
	// Datagrams is every datagram read from the sockets, before any check;
	// FeedDatagrams splits it by socket (index with a Feed).
	Datagrams     uint64
	FeedDatagrams [NumFeeds]uint64
	// Packets is the datagrams that decoded as MoldUDP64 (data,
	// heartbeats and ends of session), whatever became of them next.
	Packets uint64
	// Heartbeats is the heartbeats among Packets.
	Heartbeats uint64
	// Messages and Bytes are what was delivered to OnMessage (Bytes counts
	// message payload, not headers). FeedMessages splits Messages by the
	// socket whose copy was delivered (with A/B feeds, which feed won).
	Messages, Bytes uint64
	FeedMessages    [NumFeeds]uint64
	// Duplicates is messages received again after delivery or while held,
	// or older than Config.StartSeq; each was dropped.
	Duplicates uint64
	// Gaps is the number of gap ranges reported, GapMessages the messages
	// in them.
	Gaps, GapMessages uint64
	// Reordered is the packets that went through a reorder buffer.
	Reordered uint64
	// ReorderOverflows counts the gaps given up (reported as a Loss) to
	// make room in a full reorder buffer.
	ReorderOverflows uint64
	// Resyncs counts the times a stream confirmed to be more than
	// Config.Limits.MaxGap behind its publisher skipped ahead (each reported to
	// OnResync; the sequences skipped are not counted as lost messages);
	// SuspectJumps counts the packets and heartbeats more than MaxGap
	// ahead, confirmed or not (see the package doc's bounded-gap rule).
	Resyncs, SuspectJumps uint64
	// SuspectRestarts counts packets of a stream's own source that went
	// back as a restart would; Incarnations counts the streams replaced by
	// a newer incarnation of their session (a restart confirmed, or a new
	// source of a session whose stream was quiet or ended).
	SuspectRestarts, Incarnations uint64
	// UnverifiedRepairs counts the datagrams accepted from the repair
	// group without a RepairSource to check them against.
	UnverifiedRepairs uint64
	// ReorderEvicted counts held packets given up to make room in a full
	// reorder buffer for an older packet (a repair nearer delivery); their
	// messages are asked for again.
	ReorderEvicted uint64
	// Held is the packets in reorder buffers now (all streams); HeldMax
	// is the most one stream has held at once (at most
	// Config.Receive.ReorderPackets).
	Held, HeldMax int
	// Streams is the streams known now; StreamsEnded counts ends of
	// session reached; StreamsStopped counts streams stopped by LossStop;
	// StreamsEvicted counts streams forgotten to make room (see
	// Config.Limits.MaxStreams); StreamsExpired counts streams forgotten after
	// Config.Limits.StreamIdleTimeout of silence; SessionChanges counts new
	// sessions from a source that had another.
	Streams                                                      int
	StreamsEnded, StreamsStopped, StreamsEvicted, SessionChanges uint64
	StreamsExpired                                               uint64
	// ReadErrors counts failed reads of the sockets (see Subscriber.Err);
	// ReadersStopped counts sockets no longer read because of one.
	ReadErrors, ReadersStopped uint64

	// NAKs is the re-requests sent to the Retransmitter, NAKMessages the
	// messages they asked for (retries included). NAKErrors counts
	// re-requests the repair socket failed to send.
	NAKs, NAKMessages, NAKErrors uint64
	// Asking is the retransmitter re-requests go to now (Config.Recovery.Retransmitter
	// or one of Config.Recovery.Backups); Failovers counts the times the one asked
	// was left for the next because it did not answer (Config.Recovery.Failover).
	Asking    netip.AddrPort
	Failovers uint64
	// Suppressed is the missing messages that arrived before their first
	// NAK was due, so it was never sent (a repair heard on the repair
	// group, the other A/B feed, or plain reordering).
	Suppressed uint64
	// Confirms is the retransmitters' NAK confirms heard (wire.Confirm);
	// ConfirmsLater those that said the answer was held back behind a
	// rate limit. Confirmed is the missing messages whose first NAK was
	// not sent because a confirm said another subscriber's request for
	// them was being answered. Retries is the re-requests sent again
	// because no answer came within the retry interval: requests that
	// went unanswered.
	Confirms, ConfirmsLater, Confirmed, Retries uint64
	// GroupSize is the retransmitter's count of the subscribers asking it
	// (from its confirms) and RepairRTT the smoothed round trip from a
	// re-request to its confirm; they size the NAK back-off (0 when
	// NAK.Delay or NAK.Generator is set).
	GroupSize int
	RepairRTT time.Duration
	// SharedLoss estimates the share of the group that misses what this
	// subscriber misses (0: its losses are its own, 1: all lose the same
	// packets), from the confirms it hears; Backoff is the window the
	// first NAK of a gap is drawn from now (0: asked at once).
	SharedLoss float64
	Backoff    time.Duration
	// Repairs is the packets from the repair socket or repair group that
	// filled at least one missing message; Recovered is the messages
	// filled after being reported missing, from any socket.
	Repairs, Recovered uint64
	// LostRanges and LostMessages count what OnLoss reported.
	LostRanges, LostMessages uint64
	// RecoveryP50, RecoveryP99 and RecoveryMax summarise the time from
	// finding a gap to filling it, over every stream (see
	// Subscriber.RecoveryHistogram), to the microsecond. RecoveryClamped
	// counts recoveries longer than the histogram's 60 s, recorded as 60 s.
	RecoveryP50, RecoveryP99, RecoveryMax time.Duration
	RecoveryClamped                       uint64
	// AskedP50 and AskedP99 split the recoveries of ranges asked once
	// (Karn's rule: a range asked again gives no clean sample) in two:
	// Asked is the time from finding the gap to its re-request (the NAK
	// delay or back-off, and the wait for the thread that sends it),
	// Answered the time from the re-request to the repair (the
	// retransmitter and the network both ways). A slow recovery with a
	// short Asked is the retransmitter's or the network's; with a long
	// Asked, this host's (a NAK delay, or threads waiting for a CPU).
	AskedP50, AskedP99, AnsweredP50, AnsweredP99 time.Duration
	// Dropped is the datagrams dropped, all reasons; Drops splits it by
	// reason (index with a DropReason).
	Dropped uint64
	Drops   [NumDropReasons]uint64
	// KernelDrops is the kernel's exact count of datagrams it dropped
	// because the socket's receive buffer was full (SO_RXQ_OVFL).
	KernelDrops uint64
	// ReadBufferRequested is Config.Receive.ReadBuffer; ReadBufferGranted is what
	// the kernel reports for SO_RCVBUF (it doubles the request for its own
	// bookkeeping and caps it at 2 * net.core.rmem_max).
	ReadBufferRequested, ReadBufferGranted int
}

// Drop returns the count of drops for reason r.
func (s Stats) Drop(r DropReason) uint64 {
	if r < NumDropReasons {
		return s.Drops[r]
	}
	return 0
}

// StreamStats describe one stream.
type StreamStats struct {
	ID StreamID
	// Next is the next sequence to deliver.
	Next wire.Seq
	// Horizon is one past the highest sequence seen or reported missing.
	Horizon wire.Seq
	// End is the end-of-session sequence, wire.InvalidSeq until known.
	End wire.Seq
	// Delivered and Bytes count what reached OnMessage.
	Delivered, Bytes uint64
	// Duplicates counts messages dropped as already delivered or held.
	Duplicates uint64
	// Gaps and GapMessages count the gap ranges reported and their size.
	Gaps, GapMessages uint64
	// Held is the packets in the reorder buffer now, HeldMax the most at
	// once.
	Held, HeldMax int
	// Ended reports that the end of session was reached and delivered.
	Ended bool
	// Superseded reports that the stream's source has since started
	// another session.
	Superseded bool
	// Replaced reports that a newer incarnation of the stream's session
	// took its place: it asks for nothing and takes no repairs.
	Replaced bool
	// Resyncs counts the stream's confirmed jumps beyond MaxGap.
	Resyncs uint64
	// Stopped reports that a loss stopped the stream (LossStop).
	Stopped bool

	// Missing is the messages being recovered now (reported missing, not
	// yet filled nor given up).
	Missing uint64
	// NAKs and NAKMessages count the re-requests sent for the stream and
	// the messages they asked for.
	NAKs, NAKMessages uint64
	// Repairs is the repair packets that filled something; Recovered is
	// the messages filled after being reported missing.
	Repairs, Recovered uint64
	// LostRanges and LostMessages count what OnLoss reported.
	LostRanges, LostMessages uint64
	// RecoveryP50, RecoveryP99 and RecoveryMax summarise the stream's
	// recovery times, to the microsecond.
	RecoveryP50, RecoveryP99, RecoveryMax time.Duration
	// Detector is the stream's loss detector counters (zero before its
	// first gap); Detector.Suppressed is the NAKs a fill made unnecessary.
	Detector nak.Stats
}
