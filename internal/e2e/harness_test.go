package e2e

import (
	"net/netip"
	"os"
	"os/exec"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mdbus/mdbus/internal/race"
	"github.com/mdbus/mdbus/internal/synth"
	"github.com/mdbus/mdbus/internal/verify"
	"github.com/mdbus/mdbus/publisher"
	"github.com/mdbus/mdbus/retransmit"
	"github.com/mdbus/mdbus/subscriber"
	"github.com/mdbus/mdbus/wire"
	"github.com/stretchr/testify/require"
)

// A publisher tells a retransmit cache when its packets are in the kernel,
// so that the cache answers queued re-requests then (retransmit, "Who
// reads the requests").
var _ publisher.AfterSendSink = (*retransmit.Cache)(nil)

// scale returns full, or small under -race or -short.
func scale(full, small int) int {
	if race.Enabled || testing.Short() {
		return small
	}
	return full
}

// checker wraps verify.Checker for subscriber deliveries.
type checker struct {
	name string
	*verify.Checker[subscriber.StreamID]
}

func newChecker(name string, want int) *checker {
	return &checker{name, verify.NewChecker[subscriber.StreamID](want)}
}

func (c *checker) onMessage(m subscriber.Message) { c.Deliver(m.Stream, uint64(m.Seq), m.Data) }

// bySession finds the stream of session s.
func (c *checker) bySession(s wire.Session) (subscriber.StreamID, bool) {
	for id := range c.Streams() {
		if id.Session == s {
			return id, true
		}
	}
	return subscriber.StreamID{}, false
}

func (c *checker) verify(t *testing.T, s wire.Session, sum [32]byte, n int, first wire.Seq) {
	t.Helper()
	id, ok := c.bySession(s)
	if !ok {
		t.Fatalf("%s: no stream of session %s", c.name, s)
	}
	if err := c.Check(id, uint64(first), n, sum); err != nil {
		t.Errorf("%s: %v", c.name, err)
	}
}

func (c *checker) sessions() []string {
	var out []string
	for id := range c.Streams() {
		out = append(out, id.Session.String())
	}
	return out
}

func (c *checker) String() string { return c.name }

// deepRetransmitter is a publisher's cache of a whole million-message
// stream and the server answering from it, both closed by the test's
// cleanup: the crash and resume tests re-request everything a restarted
// process missed, so nothing may have left the cache.
func deepRetransmitter(t *testing.T) (*retransmit.Cache, *retransmit.Server) {
	t.Helper()
	cache := retransmit.NewCache(retransmit.CacheConfig{MaxMessages: 2 << 20, MaxBytes: 512 << 20})
	srv, err := retransmit.NewServer(retransmit.ServerConfig{Listen: netip.MustParseAddrPort("127.0.0.1:0"),
		Sources: []retransmit.Source{cache}, RateBytes: 500e6, RequesterRateBytes: 500e6})
	require.NoError(t, err)
	t.Cleanup(func() { srv.Close() })
	return cache, srv
}

// killFeed is the feed of the tests that kill a process under it: the
// publisher of session on group at rate messages/s, caching everything in
// a deepRetransmitter, closed by the test's cleanup.
func killFeed(t *testing.T, group netip.AddrPort, session string, rate float64) (*publisher.Publication, *retransmit.Server) {
	t.Helper()
	cache, srv := deepRetransmitter(t)
	pub, err := publisher.New(publisher.Config{Group: group, Session: session, Sinks: []publisher.Sink{cache},
		RateMessages: rate, HeartbeatInterval: 50 * time.Millisecond})
	require.NoError(t, err)
	t.Cleanup(func() { pub.Close() })
	return pub, srv
}

// childFields returns the fields ("a|b|c") that a parent test passed to
// its child process in the environment variable env, skipping the test
// when it is not such a child (the variable is unset): a child process is
// this test binary re-executed to run one Test function, which a parent
// starts and kills (startChild).
func childFields(t *testing.T, env string, n int, parent string) []string {
	t.Helper()
	v := os.Getenv(env)
	if v == "" {
		t.Skip("helper process for " + parent)
	}
	f := strings.Split(v, "|")
	require.Len(t, f, n, "%s=%q", env, v)
	return f
}

// startChild starts this test binary again to run test alone, with env
// ("NAME=value") added to its environment and its output on stderr.
func startChild(t *testing.T, test, env string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^"+test+"$", "-test.count=1")
	cmd.Env = append(os.Environ(), env)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	require.NoError(t, cmd.Start())
	return cmd
}

// startReady is startChild for a child that says it is ready (it listens)
// by creating the file ready: the file is removed first, so that an earlier
// child's does not count, and startReady returns once it is there.
func startReady(t *testing.T, test, env, ready string) *exec.Cmd {
	t.Helper()
	if err := os.Remove(ready); err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	cmd := startChild(t, test, env)
	require.True(t, poll(30*time.Second, func() bool { _, err := os.Stat(ready); return err == nil }), "%s did not get ready", test)
	return cmd
}

// awaitPublished fails the test unless publishSynth's channel says the
// publishing ended without an error within bound.
func awaitPublished(t *testing.T, published <-chan error, bound time.Duration) {
	t.Helper()
	select {
	case err := <-published:
		require.NoError(t, err)
	case <-time.After(bound):
		t.Fatal("publishing did not finish")
	}
}

// awaitExit waits for the child cmd to exit and returns its error; past
// bound it kills the child and fails the test, naming what it waited for.
func awaitExit(t *testing.T, cmd *exec.Cmd, bound time.Duration, what string) error {
	t.Helper()
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	select {
	case err := <-exited:
		return err
	case <-time.After(bound):
		cmd.Process.Kill()
		<-exited
		t.Fatalf("%s within %v", what, bound)
		return nil
	}
}

// publishSynth publishes n messages of synth.New(seed) on pub from a
// goroutine, adding each to count once published, and reports the first
// error (or nil at the end) on the returned channel.
func publishSynth(pub *publisher.Publication, seed uint64, n int, count *atomic.Int64) <-chan error {
	done := make(chan error, 1)
	go func() {
		gen := synth.New(seed)
		var buf []byte
		for range n {
			buf = gen.Next(buf[:0])
			if _, err := pub.Publish(buf); err != nil {
				done <- err
				return
			}
			count.Add(1)
		}
		done <- nil
	}()
	return done
}
