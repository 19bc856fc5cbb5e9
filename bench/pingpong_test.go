package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/mdbus/mdbus/internal/netlab"
	"github.com/stretchr/testify/require"
)

// echoSender answers each ping from another goroutine, except those in
// drop, and records what it was sent.
type echoSender struct {
	mu       sync.Mutex
	loop     *closedLoop
	drop     map[uint64]bool
	seqs     []uint64
	inFlight int
	maxIn    int
	wg       sync.WaitGroup
}

func (e *echoSender) send(msgs [][]byte) error {
	_, seq, _ := ParseStamp(msgs[0])
	e.mu.Lock()
	e.seqs = append(e.seqs, seq)
	e.inFlight++
	e.maxIn = max(e.maxIn, e.inFlight)
	e.mu.Unlock()
	if e.drop[seq] {
		e.mu.Lock()
		e.inFlight--
		e.mu.Unlock()
		return nil
	}
	e.wg.Add(1)
	go func() {
		defer e.wg.Done()
		e.mu.Lock()
		e.inFlight--
		e.mu.Unlock()
		e.loop.pong(seq)
	}()
	return nil
}
func (e *echoSender) finish(context.Context) error { return nil }
func (e *echoSender) close() error                 { return nil }
func (e *echoSender) packets() uint64              { return 0 }

func TestClosedLoopOneInFlight(t *testing.T) {
	sz, err := ParseSizes("64", 1450)
	require.NoError(t, err)
	e := &echoSender{drop: map[uint64]bool{10: true}}
	now := Now()
	l := &closedLoop{snd: e, ring: newRing(sz, 2, 1), done: make(chan struct{}), end: now + int64(time.Minute), warmEnd: now, count: 50}
	e.loop = l
	require.False(t, l.run(context.Background()))
	e.wg.Wait()
	require.Equal(t, uint64(50), l.measured)
	require.Equal(t, uint64(1), l.timeouts, "the dropped ping timed out once")
	require.Equal(t, 1, e.maxIn, "one ping in flight")
	for i, s := range e.seqs {
		require.Equal(t, uint64(i+1), s, "sequences from 1, each once")
	}
	l.pong(3) // a late answer after the end sends nothing
	require.Len(t, e.seqs, 50)
}

func TestClosedLoopInterrupted(t *testing.T) {
	sz, _ := ParseSizes("64", 1450)
	e := &echoSender{drop: map[uint64]bool{1: true}}
	now := Now()
	l := &closedLoop{snd: e, ring: newRing(sz, 2, 1), done: make(chan struct{}), end: now + int64(time.Minute), warmEnd: now}
	e.loop = l
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	require.True(t, l.run(ctx))
	require.Len(t, e.seqs, 1)
}

func TestSmokePingPong(t *testing.T) {
	netlab.Require(t)
	b, err := New(smokeConfig(t, 42700))
	require.NoError(t, err)
	defer b.Close()
	sz, err := ParseSizes("64", 1450)
	require.NoError(t, err)
	for _, sys := range []System{Mdbus, Raw} {
		t.Run(string(sys), func(t *testing.T) {
			run, err := b.Latency(context.Background(), LatencyCase{System: sys, Mode: PingPong, Sizes: sz})
			require.NoError(t, err)
			require.Equal(t, PingPong, run.Mode)
			require.Positive(t, run.Sent)
			require.Equal(t, run.Sent, run.Received+run.Lost)
			require.Equal(t, int64(run.Received), run.Total.Count, "every pong after the warm-up is measured")
			require.NotNil(t, run.ClosedLoop)
			require.Positive(t, run.ClosedLoop.RoundTripsPerSec)
			require.Positive(t, run.ClosedLoop.PingCPU)
			require.Positive(t, run.ClosedLoop.PongCPU, "the ponger process reports its CPU")
			require.LessOrEqual(t, run.Total.P50, run.Total.Max)
		})
	}
	for _, c := range []LatencyCase{
		{System: Mdbus, Mode: PingPong, Sizes: sz, Subscribers: 2},
		{System: Mdbus, Mode: PingPong, Sizes: sz, Loss: 0.1},
	} {
		_, err := b.Latency(context.Background(), c)
		require.ErrorIs(t, err, ErrConfig)
	}
	rep := b.Finish(false)
	require.Len(t, rep.Latency, 2)
	require.Len(t, rep.Ratios, 3, "p50, p99 and p99.9 of mdbus over raw")
	var buf bytes.Buffer
	require.NoError(t, b.WriteTable(&buf))
	require.Contains(t, buf.String(), "mdbus ping-pong 64B closed loop")
	require.Contains(t, buf.String(), "CPU/wall: pinger")
	js, err := json.Marshal(rep)
	require.NoError(t, err)
	var m map[string]any
	require.NoError(t, json.Unmarshal(js, &m))
	cl := m["latency"].([]any)[0].(map[string]any)["closed_loop"].(map[string]any)
	for _, k := range []string{"round_trips_per_s", "ping_cpu", "pong_cpu", "timeouts", "busy_poll_s"} {
		require.Contains(t, cl, k)
	}
}
