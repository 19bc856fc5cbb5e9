package bench

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"github.com/mdbus/mdbus/internal/cfgcheck"
	"github.com/mdbus/mdbus/publisher"
	"github.com/mdbus/mdbus/subscriber"
	"github.com/mdbus/mdbus/wire"
)

// Defaults of Config.
const (
	DefaultInterface   = "lo"
	DefaultDuration    = 5 * time.Second
	DefaultWarmup      = 500 * time.Millisecond
	DefaultBatch       = 256
	DefaultWriteBuffer = 4 << 20
	// DefaultReadBuffer is what a feed handler's socket is given: 32 MiB
	// holds about 60 ms of 64-byte messages at 4M msgs/s, so a scheduling
	// stall of the receiver does not overflow it. The kernel grants it
	// only to a process with CAP_NET_ADMIN (SO_RCVBUFFORCE; the lab of a
	// root caller) or where net.core.rmem_max allows; elsewhere it caps
	// it, and the report shows what each receiver got.
	DefaultReadBuffer  = 32 << 20
	DefaultSpin        = 2 * time.Millisecond
	DefaultInterval    = time.Second
	DefaultDrain       = 2 * time.Second
	DefaultLatencyRate = 10_000
	DefaultLinger      = 500 * time.Microsecond
	// MaxDuration bounds every run: a benchmark never runs unbounded.
	MaxDuration = time.Hour
	// MaxSubscribers bounds the subscribers of a throughput run.
	MaxSubscribers = 64
	// MaxRate bounds the offered rate in messages per second.
	MaxRate = 1e9
)

// DefaultGroup is the first multicast group and port; each run takes the
// next port (a round trip takes two groups) so that no run hears another's
// late packets.
var DefaultGroup = netip.MustParseAddrPort("239.255.77.1:41000")

// Errors.
var (
	// ErrConfig matches every invalid Config or case.
	ErrConfig = errors.New("bench: invalid config")
	// ErrNotLoopback is returned for an interface other than loopback, or
	// a TTL above 0, without Config.AllowNetwork.
	ErrNotLoopback = errors.New("bench: refusing to send benchmark traffic beyond this host")
	// ErrClosed is returned by a Bench after Close.
	ErrClosed = errors.New("bench: closed")
)

// Config configures a Bench. The zero value of every field is its default.
//
// One rule for the values of every field, here and in the other configs
// of this package (GroupConfig, GoalsConfig, SearchConfig and the cases):
// the zero value means the default. A negative value means "none" only
// for the fields whose doc says "negative:" (Warmup, Linger, Spin); for
// every other field a negative value is invalid and the call returns an
// error wrapping ErrConfig that names it.
type Config struct {
	// Command names the invocation in the report ("throughput", ...).
	Command string
	// Interface is where multicast is sent and joined; default "lo".
	Interface string
	// AllowNetwork permits an interface other than loopback and a TTL
	// above 0. Without it New refuses them: benchmark traffic is heavy.
	AllowNetwork bool
	// TTL is the multicast TTL; default 0 (the packets stay on the host).
	TTL int
	// Group is the first group and port; default DefaultGroup.
	Group netip.AddrPort
	// Duration is how long each run sends; default 5 s, at most an hour.
	Duration time.Duration
	// Count, when positive, ends a run after this many messages (after
	// the warm-up, for latency) if Duration has not ended it first.
	Count int64
	// Warmup is the start of each latency run that is sent but not
	// recorded; default 500 ms; negative: none.
	Warmup time.Duration
	// PayloadSize is the largest MoldUDP64 packet; default
	// wire.DefaultPayloadSizeIPv4 (1472, a 1500-byte MTU).
	PayloadSize int
	// Batch is how many messages a throughput sender hands over at once
	// (PublishBatch; sendmmsg for raw); default 256.
	Batch int
	// Linger is how long the mdbus publisher of a throughput run lets a
	// partly filled packet wait for more messages (publisher.Config.Linger);
	// default 500 µs; negative: none. Latency runs never linger: each
	// message leaves as soon as it is published.
	Linger time.Duration
	// ReadBuffer and WriteBuffer are the SO_RCVBUF/SO_SNDBUF requests;
	// default 4 MiB (the kernel doubles it, capped by rmem_max/wmem_max).
	ReadBuffer, WriteBuffer int
	// Timestamps asks for kernel receive timestamps (SO_TIMESTAMPNS) to
	// split latency into wire and receive-path time.
	Timestamps bool
	// BusyPoll makes every receiver, mdbus and raw alike, spin on its
	// socket for up to this long before parking (subscriber.Config
	// BusyPoll); 0 (default) never spins. It trades a CPU per receiver
	// for the receive path's wake-up tail.
	BusyPoll time.Duration
	// NoGRO turns UDP_GRO off on the mdbus subscribers' feed sockets
	// (subscriber.Config.Receive.DisableGRO); raw UDP receivers always read
	// plain, one datagram per recvmmsg slot (the baseline).
	NoGRO bool
	// SubProcs is each separate-process subscriber's Go processors (its
	// GOMAXPROCS): default 1, as "mdbus sub" runs with one feed; negative:
	// the Go runtime's own default (one per CPU, or the GOMAXPROCS
	// environment variable the child inherits). On a host whose
	// publisher and subscribers share fewer cores than they have busy
	// threads, one processor per subscriber is the cheaper way to recover
	// (package doc, "Go processors"). At most MaxProcs.
	SubProcs int
	// PubProcs is the Go processors (GOMAXPROCS) of this process while
	// it is only the publisher's side of a run, its subscribers in
	// processes of their own (ThroughputCase.Processes): default 1, as
	// "mdbus pub" runs; negative: left as they are; at most MaxProcs.
	// They are restored after the run.
	PubProcs int
	// Spin is how close to a latency message's send time the sender stops
	// sleeping and busy-waits (Go's sleeps on Linux wake up to a
	// millisecond late); default 2 ms; negative: none, never spins.
	Spin time.Duration
	// Inline makes the mdbus publisher send on the publishing goroutine
	// (publisher.Config.Inline) in latency runs; default true there, and
	// false in throughput runs, where the sending goroutine packs better.
	// Set NoInline to turn it off for latency runs too.
	NoInline bool
	// InlineThroughput makes the mdbus publisher of throughput runs send
	// on the publishing goroutine too (publisher.Config.Inline, so no
	// Linger): the thread shape of the raw UDP sender, one thread fewer
	// than a sending goroutine. Where every message fills a packet (1024
	// B messages in 1472 B packets) linger gains nothing anyway.
	InlineThroughput bool
	// NoGSO turns UDP GSO off in the mdbus publishers
	// (publisher.Config.DisableGSO), to compare against the default,
	// which sends runs of full packets as GSO trains. Raw UDP never uses
	// GSO: it is the one-datagram-per-sendmmsg-slot baseline.
	NoGSO bool
	// Recovery runs every mdbus case with its retransmitter (a cache fed
	// by the publisher, a retransmit server, NAKs from the subscribers),
	// not only the cases with loss, which always have it.
	Recovery bool
	// Interval is the length of each interval in the .hlog; default 1 s.
	Interval time.Duration
	// Drain is how long to wait for receivers after the sender stops;
	// default 2 s.
	Drain time.Duration
	// Seed seeds message contents and the impairment layer; default 1.
	Seed uint64
	// Spawn returns the command that runs a separate-process subscriber
	// with args (the child calls ChildMain with them). Default: this
	// executable with "bench _child" and args.
	Spawn func(args []string) *exec.Cmd
	// Path is how packets go from the sender to the receivers: PathLo
	// (default) over lo in this namespace, or PathVeth from one network
	// namespace of the lab to another through veth pairs and a bridge.
	// PathVeth ignores Interface and TTL: the hosts' links carry the
	// packets with TTL 1.
	Path string
	// PathHosts makes the sending and the receiving host of PathVeth;
	// Close removes them. "mdbus bench" passes the lab's
	// (internal/netlab's NICPair, inside the lab only).
	PathHosts func() (snd, rcv PathHost, err error)
	// Logger receives progress and warnings; default discards.
	Logger *slog.Logger
	// Progress, when set, is called as each run or capacity probe
	// starts, with its name and how long it is planned to send.
	Progress func(run string, planned time.Duration)
}

type settings struct {
	Config
	ifi *net.Interface
}

func (c Config) withDefaults() (settings, error) {
	s := settings{Config: c}
	bad := func(format string, a ...any) (settings, error) {
		return s, fmt.Errorf("%w: %s", ErrConfig, fmt.Sprintf(format, a...))
	}
	if s.Interface == "" {
		s.Interface = DefaultInterface
	}
	switch s.Path {
	case "":
		s.Path = PathLo
	case PathLo:
	case PathVeth:
		if s.PathHosts == nil {
			return bad("the veth path needs its hosts (Config.PathHosts; mdbus bench makes them in its lab)")
		}
	default:
		return bad("path %q: want %s or %s", s.Path, PathLo, PathVeth)
	}
	switch {
	case s.Duration < 0:
		return bad("Duration %v is negative", s.Duration)
	case s.Duration > MaxDuration:
		return bad("Duration %v is above the limit of %v", s.Duration, MaxDuration)
	case s.Duration == 0:
		s.Duration = DefaultDuration
	}
	if s.Count < 0 {
		return bad("Count %d is negative", s.Count)
	}
	switch {
	case s.Warmup == 0:
		s.Warmup = DefaultWarmup
	case s.Warmup < 0:
		s.Warmup = 0
	case s.Warmup >= s.Duration:
		return bad("Warmup %v is not shorter than the Duration %v", s.Warmup, s.Duration)
	}
	switch {
	case s.PayloadSize == 0:
		s.PayloadSize = wire.DefaultPayloadSizeIPv4
	case s.PayloadSize < wire.MinPayloadSize+StampLen || s.PayloadSize > wire.MaxPayloadSize:
		return bad("PayloadSize %d is outside %d..%d", s.PayloadSize, wire.MinPayloadSize+StampLen, wire.MaxPayloadSize)
	}
	switch {
	case s.Batch == 0:
		s.Batch = DefaultBatch
	case s.Batch < 0 || s.Batch > 65535:
		return bad("Batch %d is outside 1..65535", s.Batch)
	}
	if s.Linger = cfgcheck.OrNone(s.Linger, DefaultLinger); s.Linger > publisher.MaxLinger {
		return bad("Linger %v is above %v", s.Linger, publisher.MaxLinger)
	}
	for _, b := range []struct {
		name string
		v    *int
		def  int
	}{{"ReadBuffer", &s.ReadBuffer, DefaultReadBuffer}, {"WriteBuffer", &s.WriteBuffer, DefaultWriteBuffer}} {
		switch {
		case *b.v == 0:
			*b.v = b.def
		case *b.v < 0 || *b.v > 1<<30:
			return bad("%s %d is outside 1..1 GiB", b.name, *b.v)
		}
	}
	s.Spin = cfgcheck.OrNone(s.Spin, DefaultSpin)
	if s.BusyPoll < 0 || s.BusyPoll > subscriber.MaxBusyPoll {
		return bad("BusyPoll %v is outside 0..%v", s.BusyPoll, subscriber.MaxBusyPoll)
	}
	switch {
	case s.Interval == 0:
		s.Interval = DefaultInterval
	case s.Interval < 10*time.Millisecond:
		return bad("Interval %v is below 10ms", s.Interval)
	}
	switch {
	case s.Drain == 0:
		s.Drain = DefaultDrain
	case s.Drain < 0 || s.Drain > time.Minute:
		return bad("Drain %v is outside 0..1m", s.Drain)
	}
	if s.Seed == 0 {
		s.Seed = 1
	}
	if !s.Group.IsValid() {
		s.Group = DefaultGroup
	}
	if !s.Group.Addr().IsMulticast() || s.Group.Port() == 0 {
		return bad("group %s is not a multicast address with a port", s.Group)
	}
	if !s.Group.Addr().Is4() {
		return bad("group %s: the benchmark uses IPv4 groups", s.Group)
	}
	if s.TTL < 0 || s.TTL > 255 {
		return bad("TTL %d is outside 0..255", s.TTL)
	}
	ifi, err := net.InterfaceByName(s.Interface)
	if err != nil {
		return s, fmt.Errorf("%w: interface %q: %v", ErrConfig, s.Interface, err)
	}
	s.ifi = ifi
	if !s.AllowNetwork {
		if ifi.Flags&net.FlagLoopback == 0 {
			return s, fmt.Errorf("%w: interface %s is not loopback (Config.AllowNetwork permits it)", ErrNotLoopback, s.Interface)
		}
		if s.TTL > 0 {
			return s, fmt.Errorf("%w: TTL %d would let packets leave the host (Config.AllowNetwork permits it)", ErrNotLoopback, s.TTL)
		}
	}
	if ifi.Flags&net.FlagMulticast == 0 {
		return s, fmt.Errorf("%w: interface %s is not multicast-capable (inside the lab, lo is)", ErrConfig, s.Interface)
	}
	if s.SubProcs > MaxProcs || s.PubProcs > MaxProcs {
		return bad("SubProcs %d, PubProcs %d: at most %d Go processors", s.SubProcs, s.PubProcs, MaxProcs)
	}
	if s.SubProcs == 0 {
		s.SubProcs = 1
	}
	if s.PubProcs == 0 {
		s.PubProcs = 1
	}
	if s.Spawn == nil {
		s.Spawn = defaultSpawn
	}
	s.Logger = quietLogger(s.Logger)
	return s, nil
}

func defaultSpawn(args []string) *exec.Cmd {
	exe, err := os.Executable()
	if err != nil {
		exe = os.Args[0]
	}
	cmd := exec.Command(exe, append([]string{"bench", "_child"}, args...)...)
	killWithParent(cmd)
	return cmd
}

// CheckOutput reports whether dir can hold the output files: it creates
// the directory if needed and writes and removes a probe file.
func CheckOutput(dir string) error {
	if dir == "" {
		return nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("bench: output directory: %w", err)
	}
	f, err := os.CreateTemp(dir, ".probe-*")
	if err != nil {
		return fmt.Errorf("bench: output directory %s is not writable: %w", dir, err)
	}
	name := f.Name()
	f.Close()
	return os.Remove(name)
}

// ParseRate parses a message rate: a number of messages per second with an
// optional k or M suffix ("10k", "4M", "250000"), or "max" (0: as fast as
// possible) when allowMax.
func ParseRate(s string, allowMax bool) (float64, error) {
	t := strings.TrimSpace(s)
	if t == "max" || t == "0" {
		if !allowMax {
			return 0, fmt.Errorf("%w: rate %q: this benchmark needs a fixed rate (messages/s)", ErrConfig, s)
		}
		return 0, nil
	}
	mult := 1.0
	switch {
	case strings.HasSuffix(t, "k"), strings.HasSuffix(t, "K"):
		mult, t = 1e3, t[:len(t)-1]
	case strings.HasSuffix(t, "M"), strings.HasSuffix(t, "m"):
		mult, t = 1e6, t[:len(t)-1]
	}
	v, err := strconv.ParseFloat(t, 64)
	if err != nil {
		return 0, fmt.Errorf("%w: rate %q: want messages per second like 10000, 10k or 4M", ErrConfig, s)
	}
	v *= mult
	switch {
	case v < 0 || v != v:
		return 0, fmt.Errorf("%w: rate %q is negative", ErrConfig, s)
	case v == 0 && !allowMax:
		return 0, fmt.Errorf("%w: rate %q: this benchmark needs a positive rate", ErrConfig, s)
	case v > MaxRate:
		return 0, fmt.Errorf("%w: rate %q is above %g messages/s", ErrConfig, s, MaxRate)
	}
	return v, nil
}
