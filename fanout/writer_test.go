package fanout

import (
	"bufio"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mdbus/mdbus/internal/netlab"
	"github.com/mdbus/mdbus/publisher"
	"github.com/mdbus/mdbus/retransmit"
	"github.com/mdbus/mdbus/subscriber"
	"github.com/stretchr/testify/require"
)

// feed is a publisher with a cache and a re-request server: the history a
// lapped reader catches up from.
type feed struct {
	pub *publisher.Publication
	srv *retransmit.Server
}

func newFeed(t testing.TB, group netip.AddrPort, session string, rate float64) *feed {
	return newFeedHistory(t, group, session, rate, retransmit.CacheConfig{MaxMessages: 1 << 20}, 0)
}

// newFeedHistory is newFeed with a cache of its own bounds and answers of
// up to answerBytes per request (0: the server's default, one packet).
func newFeedHistory(t testing.TB, group netip.AddrPort, session string, rate float64, cc retransmit.CacheConfig, answerBytes int) *feed {
	t.Helper()
	cache := retransmit.NewCache(cc)
	srv, err := retransmit.NewServer(retransmit.ServerConfig{Listen: netip.MustParseAddrPort("127.0.0.1:0"),
		Sources: []retransmit.Source{cache}, RequesterRateBytes: 1e9, RateBytes: 1e9, MaxRequestBytes: answerBytes})
	require.NoError(t, err)
	t.Cleanup(func() { srv.Close() })
	pub, err := publisher.New(publisher.Config{Group: group, Session: session, Sinks: []publisher.Sink{cache},
		HeartbeatInterval: 20 * time.Millisecond, RateMessages: rate})
	require.NoError(t, err)
	t.Cleanup(func() { pub.Close() })
	return &feed{pub, srv}
}

func (f *feed) publish(t testing.TB, from, to uint64) {
	t.Helper()
	var buf []byte
	for s := from; s < to; s++ {
		buf = payload(buf, s)
		_, err := f.pub.Publish(buf)
		require.NoError(t, err)
	}
	require.NoError(t, f.pub.Flush(t.Context()))
}

// TestWriterFeedToReaders: the writer joins a real feed (in the lab) and
// three readers get every message in order, byte-identical, once.
func TestWriterFeedToReaders(t *testing.T) {
	netlab.Require(t)
	skipUnsupported(t)
	group := netip.MustParseAddrPort("239.192.20.1:32201")
	f := newFeed(t, group, "FANOUT1", 0)
	w, err := NewWriter(WriterConfig{Feed: subscriber.Config{Group: group, Recovery: subscriber.Recovery{Retransmitter: f.srv.Addr()}, StartSeq: 1},
		Path: filepath.Join(shmDir(t), "feed.ring"), Capacity: 16 << 20})
	require.NoError(t, err)
	defer w.Close()
	var checks []*checker
	for range 3 {
		c := newChecker()
		rd, err := NewReader(ReaderConfig{Path: w.Path(), OnMessage: c.onMessage, OnLoss: c.onLoss, StartSeq: 1, Retransmitter: f.srv.Addr()})
		require.NoError(t, err)
		defer rd.Close()
		checks = append(checks, c)
	}
	const n = 50_000
	f.publish(t, 1, n+1)
	for _, c := range checks {
		c.waitFor(t, n+1)
		require.Empty(t, c.lost)
	}
	require.NoError(t, w.Close())
	require.EqualValues(t, n, w.Stats().Messages) // exact once closed
}

// TestLappedReaderCatchesUp: a reader stalled while the writer goes round
// the ring several times is told it was lapped, fetches what it missed
// from the retransmitter, rejoins the ring and ends with every message
// once: 0 lost. The other reader is never lapped and never waits for it.
func TestLappedReaderCatchesUp(t *testing.T) {
	netlab.Require(t)
	skipUnsupported(t)
	group := netip.MustParseAddrPort("239.192.20.2:32202")
	// The ring holds about 0.3 s of this feed, room for the fast reader
	// on a loaded machine under -race; the stalled one waits until the
	// fast one has everything, so it is lapped whatever the timing.
	f := newFeedHistory(t, group, "FANOUT2", 200_000, retransmit.CacheConfig{MaxMessages: 1 << 20}, 1<<20)
	w, err := NewWriter(WriterConfig{Feed: subscriber.Config{Group: group, Recovery: subscriber.Recovery{Retransmitter: f.srv.Addr()}, StartSeq: 1},
		Path: filepath.Join(shmDir(t), "feed.ring"), Capacity: 8 * MinCapacity})
	require.NoError(t, err)
	defer w.Close()

	fast := newChecker()
	rdFast, err := NewReader(ReaderConfig{Path: w.Path(), OnMessage: fast.onMessage, OnLoss: fast.onLoss, StartSeq: 1, Retransmitter: f.srv.Addr()})
	require.NoError(t, err)
	defer rdFast.Close()

	slow := newChecker()
	stalled, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	var laps []Lap
	var errs []error
	rdSlow, err := NewReader(ReaderConfig{Path: w.Path(), StartSeq: 1, Retransmitter: f.srv.Addr(),
		OnMessage: func(m subscriber.Message) {
			if m.Seq == 100 {
				once.Do(func() { close(stalled); <-release })
			}
			slow.onMessage(m)
		},
		OnLoss:  slow.onLoss,
		OnLap:   func(l Lap) { laps = append(laps, l) },
		OnError: func(err error) { errs = append(errs, err) },
	})
	require.NoError(t, err)
	defer rdSlow.Close()

	const n = 150_000 // ~24 MiB of records through an 8 MiB ring
	f.publish(t, 1, n+1)
	<-stalled
	fast.waitFor(t, n+1)
	close(release)
	slow.waitFor(t, n+1)
	require.Empty(t, slow.lost)
	require.Empty(t, fast.lost)
	require.Empty(t, errs)
	st := rdSlow.Stats()
	require.NotEmpty(t, laps)
	require.EqualValues(t, len(laps), st.Laps)
	require.Positive(t, st.Fetched)
	require.EqualValues(t, n, st.Messages+st.Fetched)
	require.Zero(t, rdFast.Stats().Laps)
	require.Zero(t, rdFast.Stats().Fetched)
}

// TestReaderProcesses: readers in other processes (this test binary run
// again) read what this one writes; killing one of them (SIGKILL, asleep
// on the futex or reading) changes nothing for the others.
func TestReaderProcesses(t *testing.T) {
	skipUnsupported(t)
	r := newRing(t, 16<<20)
	const n = 100_000
	start := func() (*exec.Cmd, *bufio.Scanner) {
		cmd := exec.Command(os.Args[0], "-test.run=^TestReaderChild$", "-test.count=1")
		cmd.Env = append(os.Environ(), "FANOUT_CHILD="+r.Path()+","+strconv.Itoa(n))
		out, err := cmd.StdoutPipe()
		require.NoError(t, err)
		cmd.Stderr = os.Stderr
		require.NoError(t, cmd.Start())
		sc := bufio.NewScanner(out)
		for sc.Scan() && sc.Text() != "ready" {
		}
		return cmd, sc
	}
	type child struct {
		cmd *exec.Cmd
		sc  *bufio.Scanner
	}
	var kids []child
	for range 3 {
		cmd, sc := start()
		kids = append(kids, child{cmd, sc})
	}
	publish(r, 1, n/2)
	require.NoError(t, kids[0].cmd.Process.Kill())
	publish(r, n/2, n+1)
	kids[0].cmd.Wait()
	for _, k := range kids[1:] {
		var got string
		for k.sc.Scan() {
			if strings.HasPrefix(k.sc.Text(), "ok ") {
				got = k.sc.Text()
			}
		}
		require.NoError(t, k.cmd.Wait())
		require.Equal(t, fmt.Sprintf("ok %d", n), got)
	}
}

// TestReaderChild is the reader process of TestReaderProcesses.
func TestReaderChild(t *testing.T) {
	arg := os.Getenv("FANOUT_CHILD")
	if arg == "" {
		t.Skip("run by TestReaderProcesses")
	}
	path, count, _ := strings.Cut(arg, ",")
	n, err := strconv.ParseUint(count, 10, 64)
	require.NoError(t, err)
	c := newChecker()
	done := make(chan struct{})
	rd, err := NewReader(ReaderConfig{Path: path, OnLoss: c.onLoss, OnMessage: func(m subscriber.Message) {
		c.onMessage(m)
		if uint64(m.Seq) == n {
			close(done)
		}
	}})
	require.NoError(t, err)
	defer rd.Close()
	fmt.Println("ready")
	select {
	case <-done:
	case <-time.After(60 * time.Second):
	}
	next, err := c.state()
	require.NoError(t, err)
	require.Empty(t, c.lost)
	fmt.Printf("ok %d\n", next-1)
}

// TestWriterRestartCatchUp: the writer stops, the feed goes on, a new
// writer takes the file over (a new generation) and joins the feed live;
// the reader notices the restart, fetches what neither writer carried and
// ends with every message once.
func TestWriterRestartCatchUp(t *testing.T) {
	netlab.Require(t)
	skipUnsupported(t)
	group := netip.MustParseAddrPort("239.192.20.3:32203")
	f := newFeed(t, group, "FANOUT3", 0)
	path := filepath.Join(shmDir(t), "feed.ring")
	newWriter := func() *Writer {
		w, err := NewWriter(WriterConfig{Feed: subscriber.Config{Group: group, Recovery: subscriber.Recovery{Retransmitter: f.srv.Addr()}}, Path: path, Capacity: 8 * MinCapacity})
		require.NoError(t, err)
		return w
	}
	w1 := newWriter()
	c := newChecker()
	var gens []uint64
	rd, err := NewReader(ReaderConfig{Path: path, OnMessage: c.onMessage, OnLoss: c.onLoss, Retransmitter: f.srv.Addr(),
		OnRestart: func(g uint64) { gens = append(gens, g) }})
	require.NoError(t, err)
	defer rd.Close()
	f.publish(t, 1, 10_001)
	c.waitFor(t, 10_001)
	require.NoError(t, w1.Close())
	f.publish(t, 10_001, 20_001) // no writer: the ring never holds these
	w2 := newWriter()
	defer w2.Close()
	require.EqualValues(t, 2, w2.Stats().Generation)
	f.publish(t, 20_001, 30_001)
	c.waitFor(t, 30_001)
	require.Empty(t, c.lost)
	require.Equal(t, []uint64{2}, gens)
	st := rd.Stats()
	require.GreaterOrEqual(t, st.Fetched, uint64(10_000))
	require.EqualValues(t, 30_000, st.Messages+st.Fetched)
}
