package fanout

import (
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mdbus/mdbus/internal/netlab"
	"github.com/mdbus/mdbus/retransmit"
	"github.com/mdbus/mdbus/subscriber"
	"github.com/mdbus/mdbus/wire"
	"github.com/stretchr/testify/require"
)

// TestReaderPollAllocs pins the hot paths at zero allocations: the
// writer's append and the reader's Poll with its delivery.
func TestReaderPollAllocs(t *testing.T) {
	r := newRing(t, MinCapacity)
	var sum int
	rd, err := OpenReader(ReaderConfig{Path: r.Path(), OnMessage: func(m subscriber.Message) { sum += len(m.Data) }})
	require.NoError(t, err)
	defer rd.Close()
	data := make([]byte, 64)
	seq := wire.Seq(1)
	allocs := testing.AllocsPerRun(1000, func() {
		for range 16 {
			r.Message(subscriber.Message{Stream: testStream, Seq: seq, Data: data}, 0)
			seq++
		}
		got := 0
		for got < 16 { // a batch ends at the end of the data area
			n, err := rd.Poll()
			if n == 0 || err != nil {
				t.Fatalf("poll: %d of 16, %v", got, err)
			}
			got += n
		}
	})
	require.Zero(t, allocs)
}

// BenchmarkFanoutRingPoll: one writer and one reader on one goroutine,
// the cost of a message through the ring (append, copy out, parse,
// deliver) without the feed.
func BenchmarkFanoutRingPoll(b *testing.B) {
	for _, size := range []int{64, 1024} {
		b.Run(fmt.Sprintf("%dB", size), func(b *testing.B) {
			r := newRing(b, 64<<20)
			rd, err := OpenReader(ReaderConfig{Path: r.Path(), OnMessage: func(subscriber.Message) {}})
			require.NoError(b, err)
			defer rd.Close()
			data := make([]byte, size)
			b.SetBytes(int64(size))
			b.ReportAllocs()
			seq := wire.Seq(1)
			for b.Loop() {
				r.Message(subscriber.Message{Stream: testStream, Seq: seq, Data: data}, 0)
				seq++
				if seq%64 == 0 {
					rd.Poll()
				}
			}
		})
	}
}

// BenchmarkFanoutRingReaders: a writer goroutine and four reader
// goroutines, each reader's own rate (msgs/s) and the added latency of the
// ring (reader's delivery less the writer's stamp; p50, p99, sampled one in
// 64). The writer never waits for the readers: a reader too slow is
// lapped (reported as laps).
func BenchmarkFanoutRingReaders(b *testing.B) {
	const readers = 4
	r := newRing(b, 64<<20)
	data := make([]byte, 64)
	b.SetBytes(64)
	b.ReportAllocs()
	res := make([]readerResult, readers)
	var wg sync.WaitGroup
	n := uint64(b.N)
	rds := openReaders(b, ReaderConfig{Path: r.Path()}, res, n, &wg, nil)
	b.ResetTimer()
	start := time.Now()
	for s := uint64(1); s <= n; s++ {
		r.Message(subscriber.Message{Stream: testStream, Seq: wire.Seq(s), Data: data}, r.Now())
	}
	writeDur := time.Since(start)
	wg.Wait()
	b.StopTimer()
	closeReaders(rds)
	report(b, res, rds)
	b.ReportMetric(float64(n)/writeDur.Seconds(), "writer-msgs/s")
}

// openReaders opens one Reader per result with cfg, whose OnMessage it
// sets: hook (when set) runs first, the message is recorded in the
// reader's result, and message n marks wg done. Each result's latency
// samples are sized for n messages. The caller closes the readers
// (closeReaders).
func openReaders(b *testing.B, cfg ReaderConfig, res []readerResult, n uint64, wg *sync.WaitGroup, hook func(i int, m subscriber.Message)) []*Reader {
	b.Helper()
	var rds []*Reader
	for i := range res {
		res[i].lat = make([]int64, 0, n/64+1)
		var rd *Reader
		c := cfg
		c.OnMessage = func(m subscriber.Message) {
			if hook != nil {
				hook(i, m)
			}
			res[i].on(m, rd)
			if uint64(m.Seq) == n {
				wg.Done()
			}
		}
		var err error
		rd, err = NewReader(c)
		require.NoError(b, err)
		rds = append(rds, rd)
		wg.Add(1)
	}
	return rds
}

func closeReaders(rds []*Reader) {
	for _, rd := range rds {
		rd.Close()
	}
}

type readerResult struct {
	first, last time.Time
	n           uint64
	lat         []int64
}

func (r *readerResult) on(m subscriber.Message, rd *Reader) {
	if r.n == 0 {
		r.first = time.Now()
	}
	r.n++
	if r.n%64 == 0 {
		r.last = time.Now()
		if rd == nil {
			return
		}
		if st := rd.Stamp(); st != 0 && len(r.lat) < cap(r.lat) {
			r.lat = append(r.lat, r.last.UnixNano()-st)
		}
	}
}

func report(b *testing.B, res []readerResult, rds []*Reader) {
	var minRate, sumRate float64
	var lat []int64
	var laps, lost uint64
	for i, r := range res {
		rate := float64(r.n) / r.last.Sub(r.first).Seconds()
		if i == 0 || rate < minRate {
			minRate = rate
		}
		sumRate += rate
		lat = append(lat, r.lat...)
		if rds != nil {
			st := rds[i].Stats()
			laps += st.Laps
			lost += st.Lost
		}
	}
	b.ReportMetric(minRate, "min-msgs/s-each")
	b.ReportMetric(sumRate/float64(len(res)), "msgs/s-each")
	if len(lat) > 0 {
		slices.Sort(lat)
		b.ReportMetric(float64(lat[len(lat)/2])/1e3, "p50-µs")
		b.ReportMetric(float64(lat[len(lat)*99/100])/1e3, "p99-µs")
	}
	b.ReportMetric(float64(laps), "laps")
	b.ReportMetric(float64(lost), "lost")
}

// BenchmarkFanoutFeed compares, on one feed of 64-byte messages in the
// lab: four readers of one Writer's ring against four subscribers of the
// feed, each one's rate (msgs/s), and the ring's added latency over the
// writer's own delivery. All in this process (goroutines, not processes;
// cmd/mdbus runs them as processes).
//
// Every subscriber (the writer's and the four) asks for a 32 MiB receive
// buffer, as the end-to-end fan-out tests do; the kernel grants at most
// twice net.core.rmem_max.
func BenchmarkFanoutFeed(b *testing.B) {
	const rcvbuf = 32 << 20
	netlab.Require(b)
	skipUnsupported(b)
	for _, mode := range []string{"ring", "subscribers"} {
		b.Run(mode+"=4/64B", func(b *testing.B) {
			group := netip.MustParseAddrPort(fmt.Sprintf("239.192.20.%d:3221%d", 10+len(mode), len(mode)%10))
			f := newFeed(b, group, "FANBENCH", 0)
			n := uint64(max(b.N, 100_000))
			res := make([]readerResult, 4)
			var wg sync.WaitGroup
			var rds []*Reader
			var lost atomic.Uint64
			for i := range res {
				res[i].lat = make([]int64, 0, n/64+1)
			}
			if mode == "ring" {
				w, err := NewWriter(WriterConfig{Feed: subscriber.Config{Group: group, StartSeq: 1, Recovery: subscriber.Recovery{Retransmitter: f.srv.Addr()}, Receive: subscriber.Receive{ReadBuffer: rcvbuf}},
					Path: filepath.Join(shmDir(b), "feed.ring")})
				require.NoError(b, err)
				defer func() { b.ReportMetric(float64(w.Subscriber().Stats().LostMessages), "writer-lost"); w.Close() }()
				rds = openReaders(b, ReaderConfig{Path: w.Path(), StartSeq: 1, Retransmitter: f.srv.Addr(), Spin: benchSpin}, res, n, &wg, nil)
				defer closeReaders(rds)
			} else {
				for i := range res {
					s, err := subscriber.New(subscriber.Config{Group: group, StartSeq: 1, Recovery: subscriber.Recovery{Retransmitter: f.srv.Addr()}, Receive: subscriber.Receive{ReadBuffer: rcvbuf},
						OnLoss: func(l subscriber.Loss) { lost.Add(l.Len()) },
						OnMessage: func(m subscriber.Message) {
							res[i].on(m, nil)
							if uint64(m.Seq) == n {
								wg.Done()
							}
						}})
					require.NoError(b, err)
					defer s.Close()
					wg.Add(1)
				}
			}
			// Batches of 64 messages: the publisher's cost per message, not
			// per call, so that the feed outruns the consumers.
			batch := make([][]byte, 64)
			for i := range batch {
				batch[i] = make([]byte, 64)
			}
			b.SetBytes(64)
			b.ResetTimer()
			for sent := uint64(0); sent < n; sent += uint64(len(batch)) {
				if _, err := f.pub.PublishBatch(batch[:min(uint64(len(batch)), n-sent)]); err != nil {
					b.Fatal(err)
				}
			}
			require.NoError(b, f.pub.Flush(b.Context()))
			wg.Wait()
			b.StopTimer()
			report(b, res, rds)
			if mode == "subscribers" {
				b.ReportMetric(float64(lost.Load()), "lost")
			}
		})
	}
}

// BenchmarkFanoutStall: a feed paced at 1M msgs/s for 4 s through a
// Writer to four readers; with stall=2s one of them stalls for 2 s.
// Reported: the other readers' rate, latency and losses (compare stall=0s,
// run in the same session), and that the stalled one caught up (from the
// retransmitter) with 0 lost. Each runs once whatever b.N is
// (-benchtime=1x).
func BenchmarkFanoutStall(b *testing.B) {
	for i, stall := range []time.Duration{0, 2 * time.Second} {
		b.Run("stall="+stall.String(), func(b *testing.B) { benchStall(b, i, stall) })
	}
}

func benchStall(b *testing.B, i int, stall time.Duration) {
	netlab.Require(b)
	skipUnsupported(b)
	group := netip.MustParseAddrPort(fmt.Sprintf("239.192.20.%d:3223%d", 30+i, i))
	const rate, secs = 1_000_000, 4
	// The history holds the whole run and answers a request (1024
	// messages) in one go, as a rewinder serving a host's own readers may
	// (MaxRequestBytes, for requesters it trusts).
	f := newFeedHistory(b, group, "FANSTALL", rate, retransmit.CacheConfig{MaxMessages: 8 << 20, MaxBytes: 1 << 30}, 1<<20)
	w, err := NewWriter(WriterConfig{Feed: subscriber.Config{Group: group, StartSeq: 1, Recovery: subscriber.Recovery{Retransmitter: f.srv.Addr()}, Receive: subscriber.Receive{ReadBuffer: 32 << 20}},
		Path: filepath.Join(shmDir(b), "feed.ring")})
	require.NoError(b, err)
	defer w.Close()
	const n = rate * secs
	res := make([]readerResult, 4)
	var wg sync.WaitGroup
	rds := openReaders(b, ReaderConfig{Path: w.Path(), StartSeq: 1, Retransmitter: f.srv.Addr(), Spin: benchSpin}, res, n, &wg,
		func(i int, m subscriber.Message) {
			if i == 0 && m.Seq == rate/2 && stall > 0 {
				// Real time on purpose: a reader away for stall on the wall
				// clock, while the feed runs at its rate, is what is measured.
				time.Sleep(stall)
			}
		})
	defer closeReaders(rds)
	data := make([]byte, 64)
	b.SetBytes(64)
	b.ResetTimer()
	start := time.Now()
	for range n {
		if _, err := f.pub.Publish(data); err != nil {
			b.Fatal(err)
		}
	}
	require.NoError(b, f.pub.Flush(b.Context()))
	// The feed's own rate: on a machine short of CPU the paced publisher
	// falls below 1M msgs/s, and the readers' rate with it.
	b.ReportMetric(float64(n)/time.Since(start).Seconds(), "feed-msgs/s")
	wg.Wait()
	b.StopTimer()
	report(b, res[1:], rds[1:])
	st := rds[0].Stats()
	b.ReportMetric(float64(st.Laps), "stalled-laps")
	b.ReportMetric(float64(st.Fetched), "stalled-fetched")
	b.ReportMetric(float64(st.Lost), "stalled-lost")
	b.ReportMetric(float64(st.Messages+st.Fetched), "stalled-delivered")
	b.ReportMetric(float64(w.Subscriber().Stats().LostMessages), "writer-lost")
}

// benchSpin is the readers' Spin in BenchmarkFanoutFeed: FANOUT_SPIN=200us
// (or -1ns for none) to compare; unset, the default.
var benchSpin = func() time.Duration { d, _ := time.ParseDuration(os.Getenv("FANOUT_SPIN")); return d }()
