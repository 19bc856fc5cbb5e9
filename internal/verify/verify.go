// Package verify checks delivered message streams against what was sent:
// exactly once, in order, byte-identical. The demo, the end-to-end tests and
// the benchmarks share it.
//
// A Hash digests a stream as (length, bytes) pairs, so message boundaries
// count as well as content. A Checker records one subscriber's deliveries
// per stream (by stream key) and counts duplicates and out-of-order
// deliveries. Both are safe for concurrent use where documented.
package verify

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"hash"
	"sync"
)

// Hash digests a message stream. It is not safe for concurrent use.
type Hash struct {
	h   hash.Hash
	n   int
	lb  [4]byte
	sum [32]byte
}

// NewHash returns an empty stream digest.
func NewHash() *Hash { return &Hash{h: sha256.New()} }

// Add adds one message.
func (s *Hash) Add(msg []byte) {
	binary.BigEndian.PutUint32(s.lb[:], uint32(len(msg)))
	s.h.Write(s.lb[:])
	s.h.Write(msg)
	s.n++
}

// N is the number of messages added.
func (s *Hash) N() int { return s.n }

// Sum returns the digest of the messages added so far.
func (s *Hash) Sum() [32]byte {
	s.h.Sum(s.sum[:0])
	return s.sum
}

// Stream is what a Checker knows of one delivered stream.
type Stream struct {
	Next       uint64 // sequence after the last delivered
	First      uint64 // first sequence delivered
	Delivered  int
	Duplicates int // sequences delivered again
	OutOfOrder int // deliveries that skipped ahead
	Hash       *Hash
}

// Checker records deliveries per stream key K. Safe for concurrent use.
type Checker[K comparable] struct {
	mu      sync.Mutex
	streams map[K]*Stream
	want    int
	got     int
	done    chan struct{}
}

// NewChecker returns a checker whose Done channel closes once want
// messages (over all streams, duplicates not counted) were delivered.
func NewChecker[K comparable](want int) *Checker[K] {
	return &Checker[K]{streams: map[K]*Stream{}, want: want, done: make(chan struct{})}
}

// Deliver records message seq of stream k.
func (c *Checker[K]) Deliver(k K, seq uint64, msg []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.streams[k]
	if s == nil {
		s = &Stream{Next: seq, First: seq, Hash: NewHash()}
		c.streams[k] = s
	}
	switch {
	case seq < s.Next:
		s.Duplicates++
		return
	case seq > s.Next:
		s.OutOfOrder++
	}
	s.Next = seq + 1
	s.Hash.Add(msg)
	s.Delivered++
	c.got++
	if c.got == c.want {
		close(c.done)
	}
}

// Skip records that seq..seq+n-1 of stream k were declared lost: the next
// delivery after them is in order.
func (c *Checker[K]) Skip(k K, seq, n uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if s := c.streams[k]; s != nil && s.Next == seq {
		s.Next = seq + n
	}
}

// Done closes when the wanted number of messages was delivered.
func (c *Checker[K]) Done() <-chan struct{} { return c.done }

// Delivered is the number of messages delivered over all streams.
func (c *Checker[K]) Delivered() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.got
}

// Streams returns a copy of what is known of each stream.
func (c *Checker[K]) Streams() map[K]Stream {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[K]Stream, len(c.streams))
	for k, s := range c.streams {
		out[k] = *s
	}
	return out
}

// Check compares stream k with what was sent: n messages starting at
// first, digest sum. It returns nil when they are identical.
func (c *Checker[K]) Check(k K, first uint64, n int, sum [32]byte) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.streams[k]
	switch {
	case s == nil:
		return fmt.Errorf("stream %v: nothing delivered", k)
	case s.Duplicates != 0 || s.OutOfOrder != 0:
		return fmt.Errorf("stream %v: %d duplicates, %d out of order", k, s.Duplicates, s.OutOfOrder)
	case s.First != first || s.Delivered != n:
		return fmt.Errorf("stream %v: delivered %d messages from %d, want %d from %d", k, s.Delivered, s.First, n, first)
	case s.Hash.Sum() != sum:
		return fmt.Errorf("stream %v: content differs from what was sent (hash mismatch)", k)
	}
	return nil
}
