package bench

import (
	"bufio"
	"cmp"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/mdbus/mdbus/packetconn"
	"github.com/mdbus/mdbus/publisher"
	"github.com/mdbus/mdbus/retransmit"
	"github.com/mdbus/mdbus/subscriber"
)

// GroupConfig describes a group-scale recovery run: one publisher with
// its retransmit cache and server (answers on a repair group), a loss
// that every subscriber shares (Wrap drops packets as the publisher sends
// them, as a switch or a feed's own path would), and Subs subscriber
// processes with the shipped defaults. It measures what suppression is
// for: the re-requests and repairs per lost packet, recovery time and
// messages lost.
type GroupConfig struct {
	Subs      int            // subscriber processes, 1-256
	Count     int            // messages published
	Rate      float64        // messages per second
	Size      int            // message size in bytes (>= 8)
	Group     netip.AddrPort // the feed; the repair group is the next address, next port
	Interface string         // default "lo"
	// Wrap, when set, wraps the publisher's socket: the loss (for
	// example tools/impair's Sender). Dropped reports the data packets
	// it dropped.
	Wrap    func(packetconn.PacketConn) packetconn.PacketConn
	Dropped func() uint64
	// Spawn returns the command that runs one subscriber process with
	// args (default: this executable with "bench _group-sub").
	Spawn func(args []string) *exec.Cmd
	// Procs is each subscriber process's Go processors (GOMAXPROCS):
	// default 1, as "mdbus sub" runs with one feed; negative: the Go
	// runtime's default.
	Procs int
	// Timeout bounds the run after publishing (default 60 s). Subs,
	// Count, Rate and Size are required; zero and negative values follow
	// Config's rule.
	Timeout time.Duration
}

// GroupResult is the outcome of RunGroup.
type GroupResult struct {
	Subs        int
	Sent        int
	LostPackets uint64 // data packets the shared loss dropped
	// Requests is the re-requests the server received; Repairs the
	// repair packets it sent (unicast and multicast), confirms apart.
	Requests, Repairs, Confirms  uint64
	Coalesced, Deferred, Partial uint64
	Refused                      retransmit.RefusedStats
	// RequestsPerLoss and RepairsPerLoss divide by LostPackets.
	RequestsPerLoss, RepairsPerLoss float64
	// RecoveryP50 and RecoveryP99 are the worst subscriber's, and so are
	// AskedP50 and AnsweredP50, the two parts of a recovery of a range
	// asked once (subscriber.Stats.AskedP50): with a group, Asked is
	// mostly the NAK back-off that keeps the requests near one per loss.
	RecoveryP50, RecoveryP99, AskedP50, AnsweredP50 time.Duration
	// Lost is the messages declared lost, over every subscriber;
	// Complete the subscribers that delivered every message once, in
	// order, byte-identical.
	Lost     uint64
	Complete int
	Elapsed  time.Duration
	Children []GroupChildResult
}

// GroupChildResult is one subscriber process's report.
type GroupChildResult struct {
	Delivered   uint64        `json:"delivered"`
	Bad         uint64        `json:"bad"` // out of order, repeated or wrong bytes
	Lost        uint64        `json:"lost"`
	Gaps        uint64        `json:"gaps"`
	NAKs        uint64        `json:"naks"`
	Retries     uint64        `json:"retries"`
	Confirmed   uint64        `json:"confirmed"`
	Confirms    uint64        `json:"confirms"`
	Group       int           `json:"group"`
	RTT         time.Duration `json:"rtt"`
	RecoveryP50 time.Duration `json:"recovery_p50"`
	RecoveryP99 time.Duration `json:"recovery_p99"`
	AskedP50    time.Duration `json:"asked_p50"`
	AnsweredP50 time.Duration `json:"answered_p50"`
	Err         string        `json:"err,omitempty"`
}

type groupSpec struct {
	Group, Repair, Retransmitter netip.AddrPort
	Interface                    string
	Count, Size                  int
	Timeout                      time.Duration
	Procs                        int `json:",omitempty"` // > 0: the child's GOMAXPROCS
}

// withDefaults returns c with its defaults filled in, or an error naming
// the value out of range.
func (c GroupConfig) withDefaults() (GroupConfig, error) {
	if c.Interface == "" {
		c.Interface = "lo"
	}
	if c.Procs > MaxProcs {
		return c, fmt.Errorf("%w: Procs %d: at most %d Go processors", ErrConfig, c.Procs, MaxProcs)
	}
	if c.Procs == 0 {
		c.Procs = 1
	}
	if c.Timeout < 0 {
		return c, fmt.Errorf("%w: Timeout %v is negative", ErrConfig, c.Timeout)
	}
	c.Timeout = cmp.Or(c.Timeout, 60*time.Second)
	if c.Spawn == nil {
		c.Spawn = func(args []string) *exec.Cmd {
			cmd := defaultSpawn(args)
			cmd.Args = slices.Replace(cmd.Args, 2, 3, "_group-sub") // bench _child -> bench _group-sub
			return cmd
		}
	}
	switch {
	case c.Subs < 1 || c.Subs > 256:
		return c, fmt.Errorf("%w: Subs %d: want 1 to 256 subscribers", ErrConfig, c.Subs)
	case c.Count < 1:
		return c, fmt.Errorf("%w: Count %d: want at least 1", ErrConfig, c.Count)
	case !(c.Rate > 0) || c.Rate > MaxRate:
		return c, fmt.Errorf("%w: Rate %v: want a positive rate up to %g", ErrConfig, c.Rate, MaxRate)
	case c.Size < 8 || c.Size > 1400:
		return c, fmt.Errorf("%w: Size %d: want 8 to 1400 bytes", ErrConfig, c.Size)
	case !c.Group.Addr().Is4() || !c.Group.Addr().IsMulticast() || c.Group.Port() == 0 || c.Group.Port() == 65535:
		return c, fmt.Errorf("%w: Group %v: want an IPv4 multicast address and port", ErrConfig, c.Group)
	}
	return c, nil
}

// groupMessage fills b with message seq: its sequence, then bytes that
// follow from it, so a subscriber checks every byte without a copy of
// the stream.
func groupMessage(b []byte, seq uint64) {
	binary.BigEndian.PutUint64(b, seq)
	for i := 8; i < len(b); i++ {
		b[i] = byte(seq) ^ byte(i)
	}
}

// RunGroup runs one group-scale recovery measurement; see GroupConfig.
func RunGroup(ctx context.Context, cfg GroupConfig) (GroupResult, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return GroupResult{}, err
	}
	ifi, err := net.InterfaceByName(cfg.Interface)
	if err != nil {
		return GroupResult{}, fmt.Errorf("bench: group: interface %q: %w", cfg.Interface, err)
	}
	if ifi.Flags&net.FlagLoopback == 0 {
		return GroupResult{}, fmt.Errorf("%w: interface %s is not loopback", ErrNotLoopback, cfg.Interface)
	}
	repair := netip.AddrPortFrom(cfg.Group.Addr().Next(), cfg.Group.Port()+1)
	cache := retransmit.NewCache(retransmit.CacheConfig{})
	srv, err := retransmit.NewServer(retransmit.ServerConfig{
		Listen: netip.MustParseAddrPort("127.0.0.1:0"), Sources: []retransmit.Source{cache},
		RepairGroup: repair, Interface: cfg.Interface,
	})
	if err != nil {
		return GroupResult{}, fmt.Errorf("bench: group: %w", err)
	}
	defer srv.Close()
	spec, _ := json.Marshal(groupSpec{Group: cfg.Group, Repair: repair, Retransmitter: srv.Addr(),
		Interface: cfg.Interface, Count: cfg.Count, Size: cfg.Size, Timeout: cfg.Timeout, Procs: cfg.Procs})

	type child struct {
		cmd *exec.Cmd
		out *bufio.Scanner
		res GroupChildResult
	}
	children := make([]*child, cfg.Subs)
	var wg sync.WaitGroup
	defer func() {
		for _, c := range children {
			if c != nil && c.cmd.Process != nil {
				c.cmd.Process.Kill()
			}
		}
		wg.Wait()
	}()
	for i := range children {
		cmd := cfg.Spawn([]string{"-spec", string(spec)})
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			return GroupResult{}, fmt.Errorf("bench: group: %w", err)
		}
		var stderr strings.Builder
		cmd.Stderr = &limitedWriter{w: &stderr, n: 4096}
		if err := cmd.Start(); err != nil {
			return GroupResult{}, fmt.Errorf("bench: group: start subscriber %d: %w", i+1, err)
		}
		c := &child{cmd: cmd, out: bufio.NewScanner(stdout)}
		children[i] = c
		if !c.out.Scan() || c.out.Text() != "ready" {
			return GroupResult{}, fmt.Errorf("bench: group: subscriber %d did not start: %s", i+1, stderr.String())
		}
	}
	pub, err := publisher.New(publisher.Config{
		Group: cfg.Group, Interface: cfg.Interface, RateMessages: cfg.Rate,
		HeartbeatInterval: 50 * time.Millisecond, Sinks: []publisher.Sink{cache}, Wrap: cfg.Wrap,
	})
	if err != nil {
		return GroupResult{}, fmt.Errorf("bench: group: %w", err)
	}
	start := time.Now()
	msg := make([]byte, cfg.Size)
	for seq := uint64(1); seq <= uint64(cfg.Count); seq++ {
		if ctx.Err() != nil {
			break
		}
		groupMessage(msg, seq)
		if _, err := pub.Publish(msg); err != nil {
			pub.Close()
			return GroupResult{}, fmt.Errorf("bench: group: publish: %w", err)
		}
	}
	fctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	err = pub.Flush(fctx)
	cancel()
	if err != nil {
		pub.Close()
		return GroupResult{}, fmt.Errorf("bench: group: flush: %w", err)
	}
	// Collect every child's report (each stops when it has every message
	// or its timeout passes), then end the session.
	for _, c := range children {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for c.out.Scan() {
				if err := json.Unmarshal(c.out.Bytes(), &c.res); err == nil {
					break
				}
			}
			c.cmd.Wait()
		}()
	}
	wg.Wait()
	res := GroupResult{Subs: cfg.Subs, Sent: cfg.Count, Elapsed: time.Since(start)}
	pub.Close()
	st := srv.Stats()
	if cfg.Dropped != nil {
		res.LostPackets = cfg.Dropped()
	}
	res.Requests, res.Repairs, res.Confirms = st.Requests, st.UnicastPackets+st.MulticastPackets-st.Confirms, st.Confirms
	res.Coalesced, res.Deferred, res.Partial, res.Refused = st.Coalesced, st.Deferred, st.Partial, st.Refused
	if res.LostPackets > 0 {
		res.RequestsPerLoss = float64(res.Requests) / float64(res.LostPackets)
		res.RepairsPerLoss = float64(res.Repairs) / float64(res.LostPackets)
	}
	var errs []error
	for i, c := range children {
		r := c.res
		res.Children = append(res.Children, r)
		res.Lost += r.Lost
		res.RecoveryP50, res.RecoveryP99 = max(res.RecoveryP50, r.RecoveryP50), max(res.RecoveryP99, r.RecoveryP99)
		res.AskedP50, res.AnsweredP50 = max(res.AskedP50, r.AskedP50), max(res.AnsweredP50, r.AnsweredP50)
		if r.Err == "" && r.Delivered == uint64(cfg.Count) && r.Bad == 0 {
			res.Complete++
		} else if r.Err != "" {
			errs = append(errs, fmt.Errorf("subscriber %d: %s", i+1, r.Err))
		}
	}
	return res, errors.Join(errs...)
}

// limitedWriter keeps the first n bytes written to it.
type limitedWriter struct {
	w io.Writer
	n int
}

func (l *limitedWriter) Write(p []byte) (int, error) {
	if l.n > 0 {
		k := min(len(p), l.n)
		l.w.Write(p[:k])
		l.n -= k
	}
	return len(p), nil
}

// GroupChildMain is a group run's subscriber process: it subscribes with
// the shipped defaults (a retransmitter and the repair group), prints
// "ready", checks every message it delivers, and prints one JSON report
// when it has all of them, has been told of losses that complete the
// count, or its timeout passes.
func GroupChildMain(ctx context.Context, args []string, stdout io.Writer) error {
	var specJSON string
	for i := 0; i+1 < len(args); i++ {
		if args[i] == "-spec" || args[i] == "--spec" {
			specJSON = args[i+1]
		}
	}
	var spec groupSpec
	if err := json.Unmarshal([]byte(specJSON), &spec); err != nil || spec.Count < 1 {
		return fmt.Errorf("%w: _group-sub needs -spec JSON (it is started by mdbus bench group, not by hand)", ErrConfig)
	}
	useProcs(spec.Procs)
	var (
		mu        sync.Mutex
		res       GroupChildResult
		next      uint64 = 1
		want             = make([]byte, spec.Size)
		doneCh           = make(chan struct{})
		doneOnce  sync.Once
		finishIfs = func() {
			if res.Delivered+res.Lost+res.Bad >= uint64(spec.Count) {
				doneOnce.Do(func() { close(doneCh) })
			}
		}
	)
	sub, err := subscriber.New(subscriber.Config{
		Group: spec.Group, Interface: spec.Interface, StartSeq: 1,
		Recovery: subscriber.Recovery{Retransmitter: spec.Retransmitter, RepairGroup: spec.Repair},
		OnMessage: func(m subscriber.Message) {
			mu.Lock()
			defer mu.Unlock()
			groupMessage(want, uint64(m.Seq))
			if uint64(m.Seq) != next || string(m.Data) != string(want) {
				res.Bad++
			} else {
				res.Delivered++
			}
			next = uint64(m.Seq) + 1
			finishIfs()
		},
		OnLoss: func(l subscriber.Loss) {
			mu.Lock()
			defer mu.Unlock()
			res.Lost += l.Len()
			next = uint64(l.To)
			finishIfs()
		},
	})
	if err != nil {
		return fmt.Errorf("bench: group subscriber: %w", err)
	}
	fmt.Fprintln(stdout, "ready")
	timer := time.NewTimer(spec.Timeout + 30*time.Second)
	defer timer.Stop()
	select {
	case <-doneCh:
	case <-timer.C:
		mu.Lock()
		res.Err = fmt.Sprintf("timed out with %d of %d messages", res.Delivered, spec.Count)
		mu.Unlock()
	case <-ctx.Done():
		res.Err = "interrupted"
	}
	st := sub.Stats()
	sub.Close()
	mu.Lock()
	defer mu.Unlock()
	res.NAKs, res.Confirms, res.Group, res.RTT = st.NAKs, st.Confirms, st.GroupSize, st.RepairRTT
	res.Gaps, res.Retries, res.Confirmed = st.Gaps, st.Retries, st.Confirmed
	res.RecoveryP50, res.RecoveryP99 = st.RecoveryP50, st.RecoveryP99
	res.AskedP50, res.AnsweredP50 = st.AskedP50, st.AnsweredP50
	b, _ := json.Marshal(res)
	fmt.Fprintln(stdout, string(b))
	return nil
}

// String summarises r in one line.
func (r GroupResult) String() string {
	return fmt.Sprintf("subs %d: %d lost packets, %.2f requests and %.2f repairs per lost packet (%d requests, %d repairs, %d confirms, %d coalesced, %d held back, %d partial, refused: %s); recovery p50 %v p99 %v (asked once: NAK after p50 %v, repair p50 %v after it); %d messages lost; %d/%d complete",
		r.Subs, r.LostPackets, r.RequestsPerLoss, r.RepairsPerLoss, r.Requests, r.Repairs, r.Confirms, r.Coalesced, r.Deferred, r.Partial,
		r.Refused, r.RecoveryP50, r.RecoveryP99, r.AskedP50, r.AnsweredP50, r.Lost, r.Complete, r.Subs)
}
