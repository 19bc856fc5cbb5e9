// Package fanout shares one subscription among the consumers of a host
// through shared memory: a Writer subscribes to the feed once (one socket,
// one kernel copy of each packet, recovery by re-request once for the
// host) and appends the in-order stream, with its loss notices, to a ring
// file mapped into memory; any number of Readers, in any process of the
// same user, read it with the subscriber API (OnMessage, OnLoss, OnEnd,
// StartSeq) and no system call per message.
//
// # Usage
//
//	// The host's one subscriber (mdbus fanout):
//	w, err := fanout.NewWriter(fanout.WriterConfig{Feed: subscriber.Config{
//		Group: group, Recovery: subscriber.Recovery{Retransmitter: rewinder}}})
//	defer w.Close()
//
//	// Each consumer (mdbus sub --fanout NAME):
//	r, err := fanout.NewReader(fanout.ReaderConfig{
//		Path:          fanout.Path("", fanout.Name(group)),
//		Retransmitter: rewinder, // what a lapped reader missed comes from here
//		OnMessage:     func(m subscriber.Message) { handle(m.Stream, m.Seq, m.Data) },
//		OnLoss:        func(l subscriber.Loss) { ... },
//	})
//	defer r.Close()
//
// # The ring file
//
// A file of a header page and a data area of Capacity bytes (a power of
// two), under DefaultDir, /dev/shm/mdbus-fanout-UID: tmpfs, created 0700,
// files 0600, opened with O_NOFOLLOW and refused unless they are regular,
// ours and writable by no one else (ErrNotPrivate). Little-endian; the
// layout is part of the file format (Version 1):
//
//	 header (4096 bytes)
//	+-------+---------+-------+----------+------------+-----+-------+--------+
//	| magic | version | hdr   | capacity | generation | pid | state | origin |
//	| 8     | 4       | len 4 | 8        | 8 (atomic) | 4   | 4 (at)| 8 (at) |
//	+-------+---------+-------+----------+------------+-----+-------+--------+  0..48
//	| intent (atomic, own cache line)                                |  64
//	| tail   (atomic, own cache line)                                |  128
//	| wake (futex word, uint32) | sleepers (uint32)                  |  192
//	| marks [64] (atomic: a record start in each 1/64 of the area)   |  1024
//	+----------------------------------------------------------------+
//	 data area (capacity bytes): records, 8-byte aligned, at position % capacity
//	+-------+------+---+---+-----+-------+----------+------+-------+------+-------+
//	| len 4 | type | fam   | seq | stamp | source   | port | sess. | inc. | data  |
//	|       | 2    | 1 + 1 | 8   | 8     | addr 16  | 2    | 10    | 4    | len-56|
//	+-------+------+---+---+-----+-------+----------+------+-------+------+-------+
//
// Positions count bytes since the file was made and never go back; a record
// is at position % capacity and never wraps (a padding record fills the end
// of the data area). Types: message (seq, stamp = the writer's delivery
// time, ns on its monotonic clock since the origin, a Unix time in ns, so
// one clock read per message; data), loss and resync (the range [seq, stamp)), end of
// session (seq = the sequence after the last), padding. A record's
// identity is the subscriber's StreamID: source, session, incarnation.
//
// # Concurrency: one writer, many readers, no locks
//
// The writer (one per file: flock) raises the intent above every byte it
// is about to write (an atomic swap; it runs ahead by 64 KiB so that it is
// stored once per 64 KiB), writes the record, then publishes it with a
// release store of the tail. A reader loads the tail (acquire), copies
// what lies between its position and the tail (at most 256 KiB, up to the
// end of the data area) into a buffer of its own, then loads the intent
// again: if the writer may have begun to overwrite the copied bytes
// (intent > position + capacity) the copy is thrown away and the reader
// was lapped; otherwise every record in the copy is whole and it is
// delivered from the copy. So a reader never sees a torn record, Data is a
// reader's private bytes (valid until the callback returns, as with the
// subscriber), and a reader never writes the data area (it maps it
// read-only). On amd64 ordering the copy before the check costs nothing
// (loads are not reordered with loads); elsewhere one atomic add per batch
// fences it. The hot path of either side allocates nothing and makes no
// system call.
//
// The writer never waits for a reader. A lapped reader is told (OnLap),
// rejoins at the oldest record still intact (the segment marks say where
// records start), and for each stream the first record it then reads
// shows what it skipped: [next, seq) is fetched from
// ReaderConfig.Retransmitter through package fetch and delivered first,
// so the reader's stream goes on with no gap and no duplicate. What
// cannot be fetched is reported to OnLoss. The same rule covers a
// StartSeq before the ring (history by re-request) and a writer restart.
// Catching up needs a history that answers faster than the feed runs: a
// retransmit.Server answers one packet per request by default (a round
// trip per 20-odd 64-byte messages); for the host's own readers give the
// rewinder a larger ServerConfig.MaxRequestBytes (the stall benchmark
// answers 1024 messages per request), or a reader behind a fast feed
// catches up only when the feed slows, lapped again meanwhile.
//
// Wake-up: an idle reader polls the tail for ReaderConfig.Spin (default
// 20 µs), then sets the sleepers word, reads the futex word, checks the
// tail once more and sleeps on the futex (FUTEX_WAIT, shared between
// processes, at most 100 ms). The writer reads the sleepers word after
// each tail store (both sequentially consistent, so either the reader sees
// the tail or the writer sees the sleeper) and only when it is set swaps
// it to 0, bumps the futex word and wakes every sleeper: a busy feed with
// busy readers costs the writer no system call, an idle reader costs no
// CPU. A futex was chosen over an eventfd or a socket per reader because
// it lives in the shared page itself (no file descriptor to pass between
// processes, one wake for every reader of the file, no registration) and
// over pure spinning because a host's consumers should not each own a core.
//
// Crashes: a reader that dies leaves nothing behind (it holds no lock and
// writes only the wake-up words). A writer that dies is seen by its
// readers' Stats (Writer "gone": the header says live, its process is
// not). A writer that dies mid-record leaves an
// intent above the tail: the next writer on the file (same capacity)
// covers [tail, intent) with padding, raises the generation and goes on
// from there; readers see the new generation (OnRestart) and fetch what
// the two writers did not carry. A writer with another capacity replaces
// the file (renamed into place, the old one marked replaced) and readers
// move to it within 100 ms. A corrupt record (only the owner can write the
// file) stops the reader with ErrCorrupt; nothing read from the file sizes
// an allocation or indexes outside the mapping (FuzzReaderFile).
//
// # Compared with Aeron IPC and Chronicle Queue
//
// Aeron's IPC publications are log buffers in a memory-mapped file shared
// by the media driver and clients, with per-subscriber position counters
// the publisher may not overrun (flow control: a slow subscriber holds the
// publisher back, or is dropped after a timeout). Chronicle Queue appends
// to memory-mapped files that persist, and each tailer reads at its own
// pace from disk-backed history, so it never laps but the files grow
// until rolled. This ring sits between: like Aeron's broadcast buffer
// (used for the driver's messages to clients) the writer never waits and
// a slow reader is lapped and detects it; unlike it, the lapped reader
// loses nothing, because MoldUDP64 history is already served by the
// retransmitter or rewinder (a Chronicle-like journal behind a re-request
// server), so the ring holds only the recent stream in memory.
//
// # Platform
//
// Linux only (shared file mappings, a futex shared between processes,
// flock). Elsewhere Create, NewWriter, OpenReader and NewReader fail with
// errors.ErrUnsupported ("not supported on GOOS"); the file format and
// decoders build everywhere.
//
// BUG(mdbus): a stream whose records were all overwritten before a lapped
// reader rejoined, and which then sends nothing more (it ended), is not
// fetched: the reader learns what it skipped from a stream's next record.
//
// BUG(mdbus): a restarted writer numbers incarnations afresh; a reader
// keeps a stream by (source, session, incarnation), so a session in its
// second incarnation when the writer restarted reads as a new stream.
package fanout
