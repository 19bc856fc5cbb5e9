package fanout

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/mdbus/mdbus/subscriber"
	"github.com/mdbus/mdbus/wire"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func skipUnsupported(t testing.TB) {
	t.Helper()
	if !supported {
		t.Skipf("host fan-out is not supported on %s", runtime.GOOS)
	}
}

var testStream = subscriber.StreamID{
	Source:  netip.MustParseAddrPort("127.0.0.1:40000"),
	Session: wire.Session([]byte("TESTSESS01")),
}

// payload is message seq's bytes: the sequence, then a length that varies
// with it (so records of many sizes meet the end of the data area).
func payload(dst []byte, seq uint64) []byte {
	n := 8 + int(seq*7919%200)
	dst = binary.BigEndian.AppendUint64(dst[:0], seq)
	for len(dst) < n {
		dst = append(dst, byte(seq)+byte(len(dst)))
	}
	return dst
}

// checker checks that messages come 1, 2, 3 ... once each, byte-identical.
type checker struct {
	mu   sync.Mutex
	next uint64
	err  error
	buf  []byte
	lost []subscriber.Loss
	laps int
}

func newChecker() *checker { return &checker{next: 1} }

func (c *checker) onMessage(m subscriber.Message) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err != nil {
		return
	}
	c.buf = payload(c.buf, c.next)
	if uint64(m.Seq) != c.next || string(m.Data) != string(c.buf) {
		c.err = fmt.Errorf("got seq %d (%d bytes), want %d", m.Seq, len(m.Data), c.next)
		return
	}
	c.next++
}

func (c *checker) onLoss(l subscriber.Loss) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.lost = append(c.lost, l)
	if c.err == nil && uint64(l.From) != c.next {
		c.err = fmt.Errorf("loss [%d, %d) while expecting %d", l.From, l.To, c.next)
	}
	c.next = uint64(l.To)
}

func (c *checker) state() (uint64, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.next, c.err
}

// waitFor waits (a condition, not a sleep for a timer) until c expects
// want, and fails on a delivery error or after 20 s.
func (c *checker) waitFor(t *testing.T, want uint64) {
	t.Helper()
	ok := assert.Eventually(t, func() bool {
		next, err := c.state()
		return err != nil || next >= want
	}, 20*time.Second, time.Millisecond)
	next, err := c.state()
	require.NoError(t, err)
	require.True(t, ok, "stuck at %d of %d", next, want)
	require.Equal(t, want, next)
}

// shmDir is a temporary directory on tmpfs where there is one: a ring
// file on a disk file system has its pages written back, which is not
// what is measured or used.
func shmDir(t testing.TB) string {
	t.Helper()
	d, err := os.MkdirTemp("/dev/shm", "fanout-test-")
	if err != nil {
		return t.TempDir()
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	return d
}

func newRing(t testing.TB, capacity int) *Ring {
	t.Helper()
	skipUnsupported(t)
	r, err := Create(filepath.Join(shmDir(t), "feed.ring"), capacity)
	require.NoError(t, err)
	t.Cleanup(func() { r.Close() })
	return r
}

func publish(r *Ring, from, to uint64) {
	var buf []byte
	for s := from; s < to; s++ {
		buf = payload(buf, s)
		r.Message(subscriber.Message{Stream: testStream, Seq: wire.Seq(s), Data: buf}, int64(s))
	}
}

// TestRingSeveralReaders: three readers with goroutines of their own get
// every message of a ring that wraps many times, in order, byte-identical.
// The writer waits for the slowest reader when it is half a ring behind,
// so that no one is lapped on a loaded machine.
func TestRingSeveralReaders(t *testing.T) {
	r := newRing(t, MinCapacity)
	const n = 100_000 // ~14 MiB of records through a 1 MiB ring
	var readers []*Reader
	var checks []*checker
	for range 3 {
		c := newChecker()
		rd, err := NewReader(ReaderConfig{Path: r.Path(), OnMessage: c.onMessage, OnLoss: c.onLoss})
		require.NoError(t, err)
		readers, checks = append(readers, rd), append(checks, c)
	}
	var buf []byte
	for s := uint64(1); s <= n; s++ {
		for _, rd := range readers {
			for r.Stats().Position-rd.Stats().Position > MinCapacity/2 {
				runtime.Gosched()
			}
		}
		buf = payload(buf, s)
		r.Message(subscriber.Message{Stream: testStream, Seq: wire.Seq(s), Data: buf}, 0)
	}
	for i, c := range checks {
		c.waitFor(t, n+1)
		require.Empty(t, c.lost)
		require.NoError(t, readers[i].Close())
		st := readers[i].Stats()
		require.EqualValues(t, n, st.Messages)
		require.Zero(t, st.Laps)
		require.NoError(t, readers[i].Close(), "a second Close")
	}
}

// TestRingLappedReaderWithoutHistory: a reader that does not read while
// the writer goes round the ring is told it was lapped, rejoins at the
// oldest intact record, reports exactly what it skipped as lost (it has no
// retransmitter) and then delivers the rest with no duplicate.
func TestRingLappedReaderWithoutHistory(t *testing.T) {
	r := newRing(t, MinCapacity)
	c := newChecker()
	var laps []Lap
	rd, err := OpenReader(ReaderConfig{Path: r.Path(), OnMessage: c.onMessage, OnLoss: c.onLoss,
		OnLap: func(l Lap) { laps = append(laps, l) }})
	require.NoError(t, err)
	defer rd.Close()
	publish(r, 1, 1001)
	for {
		n, err := rd.Poll()
		require.NoError(t, err)
		if n == 0 {
			break
		}
	}
	next, err := c.state()
	require.NoError(t, err)
	require.EqualValues(t, 1001, next)
	const end = 40_000 // ~5.6 MiB: more than five laps
	publish(r, 1001, end)
	for {
		n, err := rd.Poll()
		require.NoError(t, err)
		if n == 0 && rd.Stats().Behind == 0 {
			break
		}
	}
	next, err = c.state()
	require.NoError(t, err)
	require.EqualValues(t, end, next)
	require.Len(t, laps, 1)
	require.Len(t, c.lost, 1)
	l := c.lost[0]
	require.EqualValues(t, 1001, l.From)
	st := rd.Stats()
	// What was delivered after the lap is the oldest intact part of the
	// ring: most of a capacity's worth of records.
	require.Greater(t, uint64(end)-uint64(l.To), uint64(5000), "rejoined at %d", l.To)
	require.EqualValues(t, uint64(l.To-l.From), st.Lost)
	require.EqualValues(t, end-1-uint64(l.To-l.From), st.Messages)
	require.EqualValues(t, 1, st.Laps)
}

// TestRingNotices: loss, resync and end records reach the reader's
// callbacks in order with the messages.
func TestRingNotices(t *testing.T) {
	r := newRing(t, MinCapacity)
	var got []string
	rd, err := OpenReader(ReaderConfig{Path: r.Path(),
		OnMessage: func(m subscriber.Message) { got = append(got, fmt.Sprintf("m%d", m.Seq)) },
		OnLoss:    func(l subscriber.Loss) { got = append(got, fmt.Sprintf("loss%d-%d", l.From, l.To)) },
		OnResync:  func(l subscriber.Resync) { got = append(got, fmt.Sprintf("resync%d-%d", l.From, l.To)) },
		OnEnd: func(id subscriber.StreamID, n wire.Seq) {
			got = append(got, fmt.Sprintf("end%d %v", n, id == testStream))
		},
	})
	require.NoError(t, err)
	defer rd.Close()
	publish(r, 1, 3)
	r.Loss(subscriber.Loss{Stream: testStream, From: 3, To: 5})
	publish(r, 5, 6)
	r.Resync(subscriber.Resync{Stream: testStream, From: 6, To: 100})
	publish(r, 100, 101)
	r.End(testStream, 101)
	_, err = rd.Poll()
	require.NoError(t, err)
	require.Equal(t, []string{"m1", "m2", "loss3-5", "m5", "resync6-100", "m100", "end101 true"}, got)
}

// TestRingWriterRestart: a writer that starts on the file again raises the
// generation; readers see it, keep their place and report what the new
// writer did not carry (no retransmitter here) as lost. A crashed writer's
// half-written record is covered, never delivered.
func TestRingWriterRestart(t *testing.T) {
	r := newRing(t, MinCapacity)
	path := r.Path()
	c := newChecker()
	var gens []uint64
	rd, err := OpenReader(ReaderConfig{Path: path, OnMessage: c.onMessage, OnLoss: c.onLoss,
		OnRestart: func(g uint64) { gens = append(gens, g) }})
	require.NoError(t, err)
	defer rd.Close()
	require.EqualValues(t, 1, r.Generation())
	publish(r, 1, 11)
	// A crash in the middle of a record: the intent is raised and bytes
	// are written, the tail is not; the process dies (no Close).
	r.intentW.Store(r.tail + 4096)
	copy(r.m.data[r.tail&r.m.mask:], []byte("half a record, torn by a crash"))
	require.NoError(t, r.m.close())
	r.closed = true
	require.Equal(t, "live", rd.Stats().Writer, "this process, the writer, is alive")

	_, err = Create(path, 2*MinCapacity+1)
	require.ErrorContains(t, err, "capacity")
	r2, err := Create(path, MinCapacity)
	require.NoError(t, err)
	defer r2.Close()
	require.EqualValues(t, 2, r2.Generation())
	_, err = Create(path, MinCapacity)
	require.ErrorContains(t, err, "another writer holds it")

	publish(r2, 15, 20)
	for {
		n, err := rd.Poll()
		require.NoError(t, err)
		if n == 0 && rd.Stats().Behind == 0 {
			break
		}
	}
	next, err := c.state()
	require.NoError(t, err)
	require.EqualValues(t, 20, next)
	require.Equal(t, []uint64{2}, gens)
	require.Equal(t, []subscriber.Loss{{Stream: testStream, From: 11, To: 15}}, c.lost)
	st := rd.Stats()
	require.EqualValues(t, 15, st.Messages)
	require.EqualValues(t, 1, st.Restarts)
	require.Equal(t, "live", st.Writer)
	binary.LittleEndian.PutUint32(r2.m.hdr[offPID:], 1<<22+12345) // beyond pid_max: no such process
	require.Equal(t, "gone", rd.Stats().Writer)
	require.NoError(t, r2.Close())
	require.Equal(t, "closed", rd.Stats().Writer)
}

// TestRingReplaced: a writer with another capacity replaces the file; a
// reader sleeping on the old one moves to the new one.
func TestRingReplaced(t *testing.T) {
	r := newRing(t, MinCapacity)
	path := r.Path()
	c := newChecker()
	rd, err := NewReader(ReaderConfig{Path: path, OnMessage: c.onMessage, OnLoss: c.onLoss})
	require.NoError(t, err)
	defer rd.Close()
	publish(r, 1, 6)
	c.waitFor(t, 6)
	require.NoError(t, r.Close())
	r2, err := Create(path, 2*MinCapacity)
	require.NoError(t, err)
	defer r2.Close()
	// The reader moves within one idle check (100 ms); publish until it
	// has.
	s := uint64(6)
	require.Eventually(t, func() bool {
		publish(r2, s, s+1)
		s++
		return rd.Stats().Restarts != 0
	}, 10*time.Second, time.Millisecond, "the reader did not move to the new ring")
	publish(r2, 1000, 1001)
	c.waitFor(t, 1001)
}

// TestCreateRefusesForeignFiles: a ring path that is a symbolic link, or
// a directory other users may write to, is refused.
func TestCreateRefusesForeignFiles(t *testing.T) {
	skipUnsupported(t)
	dir := t.TempDir()
	target := filepath.Join(dir, "elsewhere")
	require.NoError(t, os.WriteFile(target, make([]byte, 10), 0o600))
	link := filepath.Join(dir, "feed.ring")
	require.NoError(t, os.Symlink(target, link))
	_, err := Create(link, MinCapacity)
	require.Error(t, err)
	_, err = OpenReader(ReaderConfig{Path: link, OnMessage: func(subscriber.Message) {}})
	require.Error(t, err)

	open := filepath.Join(dir, "open")
	require.NoError(t, os.Mkdir(open, 0o777))
	require.NoError(t, os.Chmod(open, 0o777))
	_, err = Create(filepath.Join(open, "feed.ring"), MinCapacity)
	require.ErrorIs(t, err, ErrNotPrivate)
}
