// Package resume lets a consumer restart where it left off: a Checkpoint
// records the last delivered sequence of each session in a file (written
// atomically, at a bounded rate), and a Consumer starts each stream from
// its checkpoint (or from a start position: live, the session's start, a
// sequence, a time), fetches the history before the live feed from a
// journal or a retransmitter, and switches to the live feed with every
// message delivered once: no gap, no duplicate at the switch.
//
// # Catch-up, then live
//
//	checkpoint+1            first live message L
//	     |---- history ---------|---- live feed ------------->
//	     fetched by re-request  held in a bounded buffer while
//	     or read from a journal the history is fetched, then
//	                            delivered from where it ends
//
// The live subscription joins at once; its first message L of a stream
// fixes the end of the history. The history [start, L) is fetched on a
// goroutine of the consumer (JournalHistory, then RequestHistory) while
// live messages are held; a full buffer is dropped and fetched as history
// too. A range no source holds is reported as a subscriber.Loss.
//
// # Exactly-once across a crash
//
// The checkpoint is written after delivery, so on its own it gives
// at-least-once: what was delivered after the last snapshot is delivered
// again after a restart. That holds for what the application has made
// durable or visible by the time of each snapshot: an application that
// buffers its effects (a bufio.Writer on stdout) sets
// CheckpointConfig.Flush to flush them, as mdbus sub does, or a crash loses
// what the buffer held of the messages already checkpointed. Output makes an application's output
// exactly-once: each snapshot saves the output's flushed length with the
// positions, and a restart cuts the output back to it before resuming
// right after the snapshot's positions.
//
// # Usage
//
//	cp, _ := resume.OpenCheckpoint("/var/lib/app/feed.ckpt", resume.CheckpointConfig{})
//	out, _ := resume.OpenOutput("/var/lib/app/feed.out", cp)
//	c, _ := resume.New(resume.Config{
//		Feed:       subscriber.Config{Group: group, Recovery: subscriber.Recovery{Retransmitter: rewinder}},
//		Checkpoint: cp,
//		Start:      resume.Start{Kind: resume.StartSession},
//		OnMessage:  func(m subscriber.Message) { out.Writer().Write(m.Data) },
//	})
//	...
//	c.Close()   // saves the checkpoint
//	out.Close()
//	cp.Close()
package resume
