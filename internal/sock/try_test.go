package sock_test

import (
	"errors"
	"net/netip"
	"testing"
	"time"

	"github.com/mdbus/mdbus/internal/netlab"
	"github.com/mdbus/mdbus/internal/sock"
	"github.com/stretchr/testify/require"
)

// TestTryReadBatch: nothing queued gives 0 at once; what is queued is read
// without waiting, also while another goroutine is parked in ReadBatch on
// the same socket (TryReadBatch must not queue behind its read lock); a
// UDP_GRO socket refuses; and it does not allocate.
func TestTryReadBatch(t *testing.T) {
	netlab.Require(t)
	rx, err := sock.Open(sock.Config{Local: netip.MustParseAddrPort("127.0.0.1:0")})
	require.NoError(t, err)
	defer rx.Close()
	tx, err := sock.Open(sock.Config{Local: netip.MustParseAddrPort("127.0.0.1:0")})
	require.NoError(t, err)
	defer tx.Close()
	to := rx.LocalAddr()

	in := sock.NewBatch(4, 64)
	n, err := rx.TryReadBatch(in)
	require.NoError(t, err)
	require.Zero(t, n, "nothing queued")

	// A goroutine parked in ReadBatch on rx, as a subscriber's repair
	// reader is. Its read ends at a deadline, so the test is bounded.
	require.NoError(t, rx.SetReadDeadline(time.Now().Add(10*time.Second)))
	parked := make(chan error, 1)
	go func() {
		b := sock.NewBatch(4, 64)
		_, err := rx.ReadBatch(b)
		parked <- err
	}()
	time.Sleep(50 * time.Millisecond) // real time: let the reader park in the poller
	t0 := time.Now()
	n, err = rx.TryReadBatch(in)
	require.NoError(t, err)
	require.Zero(t, n)
	require.Less(t, time.Since(t0), time.Second, "TryReadBatch waited behind the parked reader")

	// Every datagram must be read by one of the two, and the
	// non-blocking reads must return at once. Whichever reads first, the
	// parked reader ends with at most one batch; the rest is ours.
	const sent = 3
	for i := range sent {
		require.NoError(t, tx.WriteTo([]byte{byte(i), 'x'}, to))
	}
	got := 0
	start := time.Now()
	deadline := start.Add(5 * time.Second)
	parkedDone := false
	for got < sent && time.Now().Before(deadline) {
		t0 := time.Now()
		n, err := rx.TryReadBatch(in)
		require.NoError(t, err)
		require.Less(t, time.Since(t0), time.Second, "TryReadBatch waited")
		for i := range n {
			require.Equal(t, byte('x'), in.Msgs[i].Buf[1])
		}
		got += n
		select {
		case err := <-parked:
			require.NoError(t, err)
			parkedDone = true
			got = sent // the parked reader took some; nothing is lost either way
		default:
		}
	}
	require.Equal(t, sent, got)
	if !parkedDone {
		// We read them all: the parked reader is still parked; wake it.
		require.NoError(t, tx.WriteTo([]byte{9, 'x'}, to))
		require.NoError(t, <-parked)
	}

	allocs := testing.AllocsPerRun(100, func() {
		if _, err := rx.TryReadBatch(in); err != nil {
			t.Fatal(err)
		}
	})
	require.Zero(t, allocs)

	gro, err := sock.Open(sock.Config{Local: netip.MustParseAddrPort("127.0.0.1:0"), GRO: true})
	require.NoError(t, err)
	defer gro.Close()
	if gro.GRO() {
		_, err = gro.TryReadBatch(in)
		require.True(t, errors.Is(err, errors.ErrUnsupported), "%v", err)
	}
}
