package journal

import "sync/atomic"

// Stats counts a Journal's file reads, so that a caller (a retransmit
// server answering from the journal, a test) can see what its requests
// cost on disk.
type Stats struct {
	// BytesRead is every byte read from segment files: records, headers,
	// compressed blocks and the scans that index sealed segments found on
	// disk.
	BytesRead uint64
	// Reads counts the read calls.
	Reads uint64
	// Blocks counts the compressed blocks read and decompressed.
	Blocks uint64
}

// ioStats are a Journal's read counters.
type ioStats struct {
	bytes, reads, blocks atomic.Uint64
}

// read counts one read call of n bytes. A nil *ioStats counts nothing.
func (s *ioStats) read(n int) {
	if s == nil {
		return
	}
	s.reads.Add(1)
	s.bytes.Add(uint64(n))
}

// Stats returns the journal's read counters. Safe for concurrent use.
func (j *Journal) Stats() Stats {
	return Stats{BytesRead: j.io.bytes.Load(), Reads: j.io.reads.Load(), Blocks: j.io.blocks.Load()}
}
