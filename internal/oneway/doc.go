// Package oneway holds the latency stamps of mdbus, the send times that
// messages carry so that a receiver can measure one-way latency, and a
// Recorder of the latencies the ITCH stamp gives. The MoldUDP64 header
// stays standard: a stamp is message content.
//
// # Stamps
//
// There are two, one per kind of message; both are part of their
// payload formats (other processes read them), so neither changes:
//
//   - The ITCH stamp (Stamp, Latency): the publisher writes the
//     wall-clock time into the ITCH 5.0 timestamp field of a synthetic
//     message (nanoseconds since midnight, 6 bytes at offset 5, as ITCH
//     defines it), so the feed stays valid ITCH (pub --synthetic, the
//     demo). A subscriber subtracts it from the time it delivers the
//     message. Across hosts the figure includes the clock offset between
//     them; use PTP-synchronised clocks or the bench round trip there.
//   - The bench stamp (PutBenchStamp, ParseBenchStamp): the first 16
//     bytes of every benchmark message, the scheduled send time on
//     CLOCK_MONOTONIC and the benchmark sequence number, which the bench
//     package's receivers and peer programs read (bench.PutStamp).
//
// A Recorder keeps an HdrHistogram per interval; it is not safe for
// concurrent use (one per delivering goroutine, or guard it).
package oneway
