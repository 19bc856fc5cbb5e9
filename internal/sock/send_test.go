package sock_test

import (
	"errors"
	"io"
	"net/netip"
	"syscall"
	"testing"
	"time"

	"github.com/mdbus/mdbus/internal/sock"
	"github.com/stretchr/testify/require"
)

// refuser is a PacketConn whose WriteBatch sends datagrams in order, at
// most perCall of them (0: all), and stops at the first datagram whose
// first byte is in refuse, returning errRefused for it, as sendmmsg does.
// With always set every call fails before sending anything. With after
// set, a call that sent everything still reports it (a wrapper's own
// datagram failed).
type refuser struct {
	refuse  map[byte]bool
	perCall int
	always  bool
	after   error
	got     []byte // first byte of each datagram sent, in order
	calls   int
}

var errRefused = syscall.EHOSTUNREACH

func (r *refuser) WriteBatch(b *sock.Batch, n int) (int, error) {
	r.calls++
	if r.always {
		return 0, errRefused
	}
	sent := 0
	for i := range n {
		if r.perCall > 0 && sent == r.perCall {
			return sent, nil
		}
		c := b.Msgs[i].Buf[0]
		if r.refuse[c] {
			return sent, errRefused
		}
		if r.got != nil {
			r.got = append(r.got, c)
		}
		sent++
	}
	return sent, r.after
}

func (*refuser) ReadBatch(*sock.Batch) (int, error)   { return 0, io.EOF }
func (*refuser) WriteTo([]byte, netip.AddrPort) error { return nil }
func (*refuser) SetReadDeadline(time.Time) error      { return nil }
func (*refuser) LocalAddr() netip.AddrPort            { return netip.AddrPort{} }
func (*refuser) Close() error                         { return nil }
func (*refuser) String() string                       { return "refuser" }

func (r *refuser) refusing(cs ...byte) *refuser {
	r.refuse = map[byte]bool{}
	for _, c := range cs {
		r.refuse[c] = true
	}
	return r
}

func batchOf(n int) *sock.Batch { return fillLetters(sock.NewBatch(n, 0), n) }

// fillLetters points message i of b at the one-byte datagram letters[i].
func fillLetters(b *sock.Batch, n int) *sock.Batch {
	for i := range n {
		b.Msgs[i].Buf = letters[i : i+1]
	}
	return b
}

var letters = []byte("abcdefghijklmnopqrstuvwxyz")

func TestSendAllSkipsRefused(t *testing.T) {
	for _, tc := range []struct {
		name    string
		conn    *refuser
		n       int
		sent    string
		refused string // first bytes of the refused datagrams, in order
		nilErrs int    // refusals that name no datagram
		calls   int
	}{
		{name: "none refused", conn: &refuser{}, n: 5, sent: "abcde", calls: 1},
		{name: "refused in the middle", conn: (&refuser{}).refusing('c'), n: 5, sent: "abde", refused: "c", calls: 2},
		{name: "refused first", conn: (&refuser{}).refusing('a'), n: 3, sent: "bc", refused: "a", calls: 2},
		{name: "refused at the end", conn: (&refuser{}).refusing('e'), n: 5, sent: "abcd", refused: "e", calls: 1},
		{name: "two refused, adjacent", conn: (&refuser{}).refusing('b', 'c'), n: 5, sent: "ade", refused: "bc", calls: 3},
		{name: "every one refused", conn: (&refuser{}).refusing('a', 'b', 'c'), n: 3, refused: "abc", calls: 3},
		{name: "short writes without error are retried", conn: &refuser{perCall: 2}, n: 5, sent: "abcde", calls: 3},
		{name: "short writes and a refusal", conn: (&refuser{perCall: 2}).refusing('b'), n: 5, sent: "acde", refused: "b", calls: 3},
		{name: "error after all were sent", conn: &refuser{after: errRefused}, n: 3, sent: "abc", nilErrs: 1, calls: 1},
		{name: "nothing to send", conn: &refuser{}, n: 0, calls: 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.conn.got = []byte{}
			var refused []byte
			nilErrs := 0
			calls := sock.SendAll(tc.conn, batchOf(max(tc.n, 1)), tc.n, func(m *sock.Message, err error) bool {
				require.ErrorIs(t, err, errRefused)
				if m == nil {
					nilErrs++
				} else {
					refused = append(refused, m.Buf[0])
				}
				return true
			})
			require.Equal(t, tc.sent, string(tc.conn.got), "sent")
			require.Equal(t, tc.refused, string(refused), "refused")
			require.Equal(t, tc.nilErrs, nilErrs, "refusals naming no datagram")
			require.Equal(t, tc.calls, calls, "WriteBatch calls")
			require.Equal(t, tc.calls, tc.conn.calls)
		})
	}
}

// A socket that fails every call, or sends nothing without saying why,
// costs one call per datagram and no more.
func TestSendAllPersistentError(t *testing.T) {
	t.Run("error", func(t *testing.T) {
		c := &refuser{always: true}
		var refused []byte
		calls := sock.SendAll(c, batchOf(4), 4, func(m *sock.Message, err error) bool {
			require.ErrorIs(t, err, errRefused)
			refused = append(refused, m.Buf[0])
			return true
		})
		require.Equal(t, 4, calls)
		require.Equal(t, "abcd", string(refused))
	})
	t.Run("no progress", func(t *testing.T) {
		stuck := &stuckConn{refuser: &refuser{}}
		n := 0
		calls := sock.SendAll(stuck, batchOf(3), 3, func(m *sock.Message, err error) bool {
			require.ErrorIs(t, err, io.ErrNoProgress)
			require.NotNil(t, m)
			n++
			return true
		})
		require.Equal(t, 3, calls)
		require.Equal(t, 3, n)
	})
	t.Run("stop", func(t *testing.T) {
		c := &refuser{always: true}
		n := 0
		calls := sock.SendAll(c, batchOf(4), 4, func(*sock.Message, error) bool { n++; return false })
		require.Equal(t, 1, calls)
		require.Equal(t, 1, n)
	})
}

// stuckConn sends nothing and reports no error.
type stuckConn struct{ *refuser }

func (s *stuckConn) WriteBatch(*sock.Batch, int) (int, error) { s.calls++; return 0, nil }

func TestSendAllAllocs(t *testing.T) {
	c := (&refuser{}).refusing('c')
	b := batchOf(8)
	bad := 0
	allocs := testing.AllocsPerRun(100, func() {
		fillLetters(b, 8)
		sock.SendAll(c, b, 8, func(m *sock.Message, err error) bool {
			if errors.Is(err, errRefused) {
				bad++
			}
			return true
		})
	})
	require.Zero(t, allocs)
	require.Positive(t, bad)
}

func BenchmarkSendAll(b *testing.B) {
	c := (&refuser{}).refusing('c')
	batch := batchOf(16)
	bad := 0
	b.ReportAllocs()
	for b.Loop() {
		fillLetters(batch, 16)
		sock.SendAll(c, batch, 16, func(*sock.Message, error) bool { bad++; return true })
	}
}
