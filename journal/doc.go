// Package journal is mdbus's durable log: an append-only, segmented record
// of MoldUDP64 streams on disk, from which recorders resume, rewinders
// answer re-requests (a Journal is a retransmit.Source) and replays read.
//
// It does no network I/O and imports only the standard library, wire and
// github.com/klauspost/compress/zstd.
//
// # Usage
//
//	j, err := journal.Open("/var/lib/mdbus", journal.Config{})
//	w, err := j.Create(session, source, 1)
//	err = w.Append(seq, time.Now().UnixNano(), msg) // or w.AppendPacket(pkt, ts)
//	err = w.Close()
//
//	r, err := j.OpenReader(w.ID())
//	err = r.SeekSeq(1000) // or r.SeekTime(ns)
//	for {
//		rec, err := r.Next() // io.EOF at the end; *CorruptError, never a bad record
//		...
//	}
//
// A Span reads part of a stream, by sequence and time, and stops there
// (a replay's range):
//
//	sr, err := j.OpenSpan(id, journal.Span{From: 1000, ToTime: ns}) // Next: io.EOF past the span
//
// A Sink journals what a publisher sends: give it to the publisher's
// sinks, Start it once the publication's session and source port are
// known, End it after the publisher is closed:
//
//	sink := journal.NewSink(j) // publisher.Config{Sinks: ...}
//	err = sink.Start(pub.Session(), pub.LocalAddr(), pub.NextSeq())
//	err = sink.End(pub.NextSeq()) // end of session, writer closed
//
// Streams are named by wire.StreamID (source, session, incarnation); the
// journal numbers the incarnations of each (session, source) from 1.
//
// # Layout
//
// A journal directory holds one directory per stream incarnation, named
// by session (hex, since a session may hold any printable byte), source
// (hex of its binary form, "0" when unknown) and incarnation:
//
//	DIR/4e415344415131202020_7f0000011388_1/00000000000000000001.seg
//	                                       /00000000000001048577.zst
//	                                       /00000000000002097153.seg   <- newest
//
// Each stream is a run of segments named by their first sequence (20
// decimal digits). Only the newest segment is appended to; the others are
// sealed (synced before the next one was created) and may be compressed
// (.zst). A file being written is *.tmp until complete.
//
// # Segment format
//
// All integers are little endian. Part of the on-disk format; do not
// change (FormatVersion says which format a segment has).
//
//	segment header (72 bytes)
//	 0 +----------------------------------+
//	   | magic "MDBUSJNL"              8  |
//	 8 +-----------------+----------------+
//	   | version       2 | flags        2 |
//	12 +-----------------+----------------+
//	   | session (ASCII, space padded) 10 |
//	22 +--------+--------+----------------+
//	   | fam  1 | 0    1 |
//	24 +--------+--------+----------------+
//	   | source address (IPv4 mapped) 16  |
//	40 +-----------------+----------------+
//	   | source port   2 | 0            2 |
//	44 +-----------------+----------------+
//	   | incarnation                    4 |
//	48 +----------------------------------+
//	   | first sequence                 8 |
//	56 +----------------------------------+
//	   | created, ns since the epoch    8 |
//	64 +-----------------+----------------+
//	   | CRC-32C       4 | 0            4 |
//	72 +-----------------+----------------+
//	CRC is CRC-32C (Castagnoli) of the 64 bytes before it; fam is 0 (no
//	source), 4 or 6; version is 1 or 2 (FormatVersion, written by this
//	package); flags bit 0 marks a compressed segment, and in version 2
//	bit 1 the first segment of its stream (made by Create) and bit 2 a
//	segment before which retention removed the older ones.
//
//	record (at every multiple of 8 bytes after the header)
//	+-----------+-----------+------+------------------------------+---------+
//	| length    | CRC-32C   | type | payload                      | padding |
//	| 4         | 4         | 1    | length-1                     | to 8    |
//	+-----------+-----------+------+------------------------------+---------+
//	length counts type+payload (17 to 17+65535); the CRC covers type+payload.
//	type 1, message:        seq (8) | time ns (8) | message bytes
//	type 2, end of session: next seq (8) | time ns (8)
//	version 2 adds:
//	type 3, message that starts a packet (first or only message of it)
//	type 4, message in the same packet as the record before it
//	        (3 and 4: payload as type 1)
//	type 5, seal:           next seq (8) | time ns (8); the last record
//	        of a segment whose successor, starting at next seq, exists
//
// Which messages shared a packet (types 3 and 4) is recorded by
// Writer.AppendPacket and AppendMarked, and read back as Record.Packet;
// type 1 (Append, and every journal of version 1) says nothing of it. A
// packet is a type 3 record and the type 4 records after it; it may span
// two segments. Version 1 segments read as before; a version 2 segment
// is refused by readers that know only version 1, by its version.
//
// Records are aligned to 8 bytes so the length field never straddles a
// sector: a crash leaves a record whole, cut short, or zero filled, never a
// torn length pointing into the next record (as etcd's wal). A length
// outside its range is corruption, never an allocation: records are capped
// at MaxRecordLen.
//
// A compressed segment has the same header (flag bit 0 set), then blocks,
// each one zstd frame of whole records in the framing above, then a block
// index and a footer:
//
//	block
//	+-------------+-------------+-----------+--------+-----------+------------------+---------+
//	| comp. len   | uncomp. len | CRC-32C   | count  | first seq | zstd frame       | padding |
//	| 4           | 4           | 4 (frame) | 4      | 8         | comp. len        | to 8    |
//	+-------------+-------------+-----------+--------+-----------+------------------+---------+
//	index: per block, first seq (8) | block offset (8) | max time before it (8)
//	footer (48): index offset (8) | blocks (4) | flags (4, bit 0 ended) | next seq (8) |
//	             first time (8) | max time (8) | CRC-32C of index+footer (4) | "MDBZ"
//
// A read by sequence binary-searches the index and decompresses one block
// (Config.BlockBytes uncompressed, default 64 KiB), not the segment.
//
// # Indexes
//
// Each uncompressed segment has a sparse in-memory index, one entry per
// 16 KiB (sequence, offset, largest time before it), and under it a fine
// index, one packed 4-byte entry per 512 bytes (about 0.8% of the data,
// in memory): SeekSeq and SeekTime binary-search the segments, then the
// index, then scan at most 16 KiB (SeekSeq: 512 bytes). The writer
// builds both as it appends; a sealed segment found on disk is indexed by
// one sequential scan on its first seek.
//
// # Reads per re-request
//
// A sequential Reader reads ahead 1 MiB per read call. A re-request
// answered through AppendPacket (the retransmit.Source path) reads
// instead what its answer needs: the headers of the records between the
// fine index entry and the first sequence wanted (at most 512 bytes of
// records), then positioned reads sized by the bytes left in the answer
// packet and the count left, so that it reads the framed records it
// answers and at most one record more. A record's framing (25 bytes and
// padding) is more than the 2 bytes a message adds to a packet, so the
// ratio depends on message size: with 20-100 byte messages (mean 60) a
// flood of 10,000 random old-range requests read 1.48 times the bytes
// answered (at most 2.0 for one request); messages under about 25 bytes
// make it more. From a compressed segment a request reads the blocks
// that hold its records (64 KiB uncompressed each): usually one, the
// next too when its range crosses a block boundary; a request within the
// block the previous one read reads nothing. Stats counts every byte
// read, including the one-time scans that index segments found on disk,
// so a server can watch what its requests cost. Since reads are bounded
// by answer bytes, the retransmit server's per-requester byte budget
// bounds the disk reads it pays for too.
//
// # Recovery and corruption
//
// Open scans the newest segment of every stream. A bad record (short,
// zero filled, bad length or CRC) after which no valid record follows is
// a torn tail: Open truncates the segment there, syncs it, logs it and
// lists it in TornTails, and appending resumes at the next sequence. A bad
// record with a valid record after it, or any bad record in a sealed
// segment, is corruption: readers return a *CorruptError naming the file
// and byte offset (errors.Is(err, ErrCorrupt)) when they reach it, never
// skip it and never return the record; the stream takes no appends (Resume
// fails) and no acknowledged byte is cut. "mdbus journal verify" finds it
// and "mdbus journal repair" rewrites the damaged segment from a
// retransmitter. A segment whose header names another session or stream
// than its directory makes Open fail with ErrSession naming the file.
//
// # Layout damage
//
// Damage outside the records is found at Open and listed by Damage: a
// stream directory whose name does not parse or that holds no segment, a
// file whose name is not a segment's, a segment whose header is bad,
// short or names another first sequence than its file name, a segment
// missing before the oldest (the oldest carries neither the first-segment
// nor the retention flag), a sealed newest segment (its successor was
// deleted or emptied: the writer seals a segment only after its successor
// is on disk, so a crash never looks like this), and a symbolic link,
// FIFO, socket or device where a directory or segment belongs. Every
// file is opened with O_NOFOLLOW|O_NONBLOCK and refused unless fstat says
// it is a regular file, so nothing is followed and nothing blocks. A
// read-only Open skips what is damaged and lists it; a read-write Open
// fails on a segment it cannot read and lists the rest. Verify finds the
// sequences missing between segments (a deleted middle segment) and
// readers stop there with a *CorruptError.
//
// # Durability
//
// Every Append reaches the operating system before it returns (one write
// call; AppendPacket one per packet), so a crash of the process never
// loses an appended record. What a crash of the machine may lose depends
// on Config.Sync:
//
//   - SyncInterval (default): a background goroutine owned by the Writer
//     fdatasyncs at most Config.SyncInterval (default 10 ms) after a
//     record was appended; a machine crash loses at most the records of
//     that last interval. Durable reports the synced boundary.
//   - SyncEvery: Append returns after fdatasync: nothing acknowledged is
//     ever lost, at the cost of one sync per record (per packet for
//     AppendPacket).
//   - SyncNone: the kernel writes back when it likes; a machine crash may
//     lose anything not written back. Segments are still synced when
//     sealed, so only the newest can have a torn tail.
//
// Sync syncs on demand; End and Close always sync. A write or sync error
// (ENOSPC, EIO, a read-only file system, the directory deleted under a
// running writer, detected when a sync finds the segment unlinked) is
// latched: Append, Sync and Err return it from then on, and the segment is
// cut back to its last whole record.
//
// # Concurrency
//
// A Journal's methods are safe for concurrent use. A Writer has one user
// at a time (its background sync goroutine is internal); a Reader too.
// Readers may follow a stream while it is written: they see every record
// whose write returned. Bounds and AppendPacket (the retransmit.Source
// methods) may be called from any goroutine and do not allocate in a
// steady state. Journal.Close closes the writers and readers it handed out
// and stops the background compressor; call it after their users stopped.
//
// One read-write Open of a directory at a time: it holds an flock on
// DIR/LOCK (a second one fails with ErrLocked), because recovery cuts torn
// tails and would cut another writer's records in flight. ReadOnly opens
// take no lock and may run beside a writer in another process; they see
// its newest partial record as a torn tail and cut nothing.
//
// # Retention and compression
//
// With Config.RetainBytes or RetainAge, the oldest sealed segments of a
// stream are deleted when it passes that size, or when their newest record
// is older, checked when a segment is sealed and at Open; a stream stays
// one contiguous range. With Config.Compress, sealed segments are
// compressed in the background by one goroutine with one reused encoder;
// Compact does it on demand. Readers share one zstd decoder, whose memory
// is capped (WithDecoderMaxMemory).
package journal
