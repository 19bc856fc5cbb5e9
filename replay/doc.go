// Package replay paces recorded messages back out: at the recorded pace,
// at a speed factor, at a fixed rate or as fast as possible, optionally in
// a loop, with progress reports. It knows nothing of sockets or files: a
// Source yields journal records in order and an emit function sends or
// prints each one (mdbus replay wires a journal reader to a publisher or
// to stdout).
//
// # Pacing without drift
//
// Every message's target time is computed from the anchor, never from the
// previous message: with speed F the message stamped ts is due at
//
//	start + (ts - ts0) / F
//
// where start is when the first message was emitted and ts0 its
// timestamp; with a fixed rate R the i-th message (from 0) is due at
// start + i/R. A late wake-up delays one message and is not carried into
// the next, so the error does not accumulate over a long replay. A message
// already due (the replay fell behind) is emitted at once.
//
// The pacer sleeps on a Go timer until Spin (DefaultSpin, 1.5 ms) before
// the target: a Go timer asked for anything under a millisecond wakes
// after about 1.1 ms on Linux, so a shorter margin makes every closely
// spaced message late by most of a millisecond. On Linux it then sleeps
// with nanosleep(2) (50-100 µs late) until FineSpin (200 µs) before the
// target and spins the rest, about 150 µs of one core per message (or
// packet); elsewhere it spins, yielding the processor, from Spin.
//
// # Packets, passes, fixed rates
//
// With Options.EmitPacket, Run hands out the records that share a
// timestamp (the journal stamps the messages of one received packet
// alike) together, so that they leave in one packet, and paces packets:
// Config.PPS and Config.Mbps are fixed rates of packets and of packet bits.
// Options.BeginPass runs before each pass is anchored (a publisher is
// created there, so the first message is on time). At a recorded pace each
// pass of a loop starts a new timeline; a fixed rate goes on across the
// passes.
//
// # Usage
//
//	p := replay.NewPacer(replay.Config{Speed: 10})
//	for {
//		rec, err := src.Next()
//		if err != nil { break }
//		if err := p.Wait(ctx, rec.Time); err != nil { break } // ctx cancelled
//		send(rec)
//	}
package replay
