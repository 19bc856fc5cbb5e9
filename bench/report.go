package bench

import (
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"

	hdr "github.com/HdrHistogram/hdrhistogram-go"
)

// Schema names the JSON report format; it changes when a field changes
// meaning.
const Schema = "mdbus-bench/1"

// System is what carries the messages in a run.
type System string

// Systems.
const (
	// Mdbus is the bus: publisher.Publication to subscriber.Subscriber,
	// MoldUDP64 packets holding as many messages as fit.
	Mdbus System = "mdbus"
	// Raw is plain UDP multicast sockets with no protocol: one datagram
	// per message, sent with sendmmsg and received with recvmmsg.
	Raw System = "raw"
)

// Report is everything one `mdbus bench` invocation measured, as written to
// the JSON file. Latencies are in nanoseconds; rates per second.
type Report struct {
	Schema      string           `json:"schema"`
	Command     string           `json:"command"`
	Started     time.Time        `json:"started"`
	Seconds     float64          `json:"seconds"`
	Interrupted bool             `json:"interrupted"`
	Machine     Machine          `json:"machine"`
	Settings    Settings         `json:"settings"`
	Throughput  []ThroughputRun  `json:"throughput,omitempty"`
	Latency     []LatencyRun     `json:"latency,omitempty"`
	Capacity    []CapacityResult `json:"capacity,omitempty"`
	Ratios      []Ratio          `json:"ratios,omitempty"`
	Goals       []Goal           `json:"goals,omitempty"`
	Files       []string         `json:"files,omitempty"`
	Notes       []string         `json:"notes,omitempty"`
}

// Machine describes where the run happened.
type Machine struct {
	CPU       string  `json:"cpu"`
	Cores     int     `json:"cores"`
	Kernel    string  `json:"kernel"`
	GoVersion string  `json:"go"`
	InLab     bool    `json:"in_lab"`
	LoadStart float64 `json:"load1_start"`
	LoadEnd   float64 `json:"load1_end"`
}

// Settings are the configuration values common to the runs.
type Settings struct {
	Interface   string  `json:"interface"`
	TTL         int     `json:"ttl"`
	PayloadSize int     `json:"payload_size"`
	Batch       int     `json:"batch"`
	Linger      float64 `json:"linger_s"`
	ReadBuffer  int     `json:"read_buffer"`
	WriteBuffer int     `json:"write_buffer"`
	Duration    float64 `json:"duration_s"`
	Count       int64   `json:"count"`
	Warmup      float64 `json:"warmup_s"`
	Interval    float64 `json:"interval_s"`
	Timestamps  bool    `json:"kernel_timestamps"`
	// InlineThroughput: the mdbus throughput publisher sent inline.
	InlineThroughput bool   `json:"inline_throughput,omitempty"`
	Seed             uint64 `json:"seed"`
	// NoGSO: the mdbus publishers had UDP GSO off.
	NoGSO bool `json:"no_gso,omitempty"`
	// NoGRO: the mdbus subscribers read without UDP_GRO.
	NoGRO bool `json:"no_gro,omitempty"`
	// SubProcs: each subscriber process's GOMAXPROCS (0: the Go
	// runtime's default).
	SubProcs int `json:"sub_procs,omitempty"`
	// PubProcs: this process's GOMAXPROCS during runs with subscriber
	// processes (0: the Go runtime's default).
	PubProcs int `json:"pub_procs,omitempty"`
	// Path is how packets went: "lo", or "veth" between two namespaces
	// (Config.Path).
	Path string `json:"path,omitempty"`
}

// ThroughputRun is one throughput measurement: one publisher, N
// subscribers.
type ThroughputRun struct {
	Name        string  `json:"name"`
	System      System  `json:"system"`
	Size        string  `json:"size"`
	MeanSize    float64 `json:"mean_size"`
	Rate        float64 `json:"offered_rate"` // messages/s; 0 = as fast as possible
	Subscribers int     `json:"subscribers"`
	Processes   bool    `json:"processes"`
	Loss        float64 `json:"loss"`
	// PayloadSize is the mdbus packet size when it differs from the
	// report's Settings.PayloadSize.
	PayloadSize int `json:"payload_size,omitempty"`
	// Sent is the publisher's side.
	Sent Counts `json:"sent"`
	// GSOPackets is how many of the mdbus publisher's packets left in
	// UDP GSO trains.
	GSOPackets uint64 `json:"gso_packets,omitempty"`
	// Subs is each subscriber's side.
	Subs []SubResult `json:"subs"`
	// MinMsgsPerSec is the slowest subscriber's delivered message rate.
	MinMsgsPerSec float64 `json:"min_msgs_per_s"`
	// Complete is true when every subscriber delivered every message sent.
	Complete bool `json:"complete"`
	// Latency is the one-way latency of 1 in 64 messages under this load.
	Latency *Percentiles `json:"latency,omitempty"`
	// Recovery is, with loss, the time from a gap's detection by the
	// subscriber to the delivery of its last message (repaired).
	Recovery    *Percentiles `json:"recovery,omitempty"`
	Interrupted bool         `json:"interrupted,omitempty"`
	Error       string       `json:"error,omitempty"`
	CPUSeconds  float64      `json:"cpu_s"` // this process (children excluded)
}

// Counts is a message, byte and datagram tally over a time span.
type Counts struct {
	Messages      uint64  `json:"messages"`
	Bytes         uint64  `json:"bytes"`
	Packets       uint64  `json:"packets"`
	Seconds       float64 `json:"seconds"`
	MsgsPerSec    float64 `json:"msgs_per_s"`
	BytesPerSec   float64 `json:"bytes_per_s"`
	PacketsPerSec float64 `json:"packets_per_s"`
	MsgsPerPacket float64 `json:"msgs_per_packet"`
}

func (c *Counts) rates() {
	if c.Seconds > 0 {
		c.MsgsPerSec = float64(c.Messages) / c.Seconds
		c.BytesPerSec = float64(c.Bytes) / c.Seconds
		c.PacketsPerSec = float64(c.Packets) / c.Seconds
	}
	if c.Packets > 0 {
		c.MsgsPerPacket = float64(c.Messages) / float64(c.Packets)
	}
}

// SubResult is one subscriber's tally. Bytes count message bytes
// (payload), not headers.
type SubResult struct {
	Name string `json:"name"`
	Counts
	// KernelDrops: datagrams the kernel dropped for want of receive
	// buffer (SO_RXQ_OVFL).
	KernelDrops uint64 `json:"kernel_drops"`
	// ReadBuffer: the receive buffer the kernel granted, bytes.
	ReadBuffer int `json:"read_buffer_granted"`
	// Gaps: sequence gaps the subscriber detected.
	Gaps uint64 `json:"gaps"`
	// Repairs: messages recovered by retransmission.
	Repairs uint64 `json:"repairs"`
	// Lost: messages declared lost (never delivered). For raw UDP, the
	// datagrams that did not arrive.
	Lost uint64 `json:"lost"`
	// Missing: benchmark sequence numbers never delivered, counted by the
	// benchmark itself from the stamps (an independent check of Lost).
	Missing uint64 `json:"missing"`
	// Measured: messages delivered that were scheduled after the
	// warm-up (latency runs).
	Measured uint64 `json:"measured,omitempty"`
	// Disorder: messages delivered twice or out of order (must be 0 for
	// mdbus).
	Disorder uint64 `json:"disorder"`
	Complete bool   `json:"complete"`
	// Procs: a subscriber process's Go processors (GOMAXPROCS); 0 for
	// one in the bench's own process.
	Procs int `json:"procs,omitempty"`
	// NAKs, Retries, ConfirmsLater and HeldMax: an mdbus subscriber's
	// re-requests sent, those sent again because no answer came within the
	// retry interval, the confirms that said an answer was held back, and
	// the most packets it held behind a gap (subscriber.Stats).
	NAKs          uint64 `json:"naks,omitempty"`
	Retries       uint64 `json:"retries,omitempty"`
	ConfirmsLater uint64 `json:"confirms_later,omitempty"`
	HeldMax       int    `json:"held_max,omitempty"`
	// Asked* and Answered* split an mdbus subscriber's recoveries of
	// ranges asked once (subscriber.Stats.AskedP50): finding the gap to
	// its re-request, and the re-request to its repair; seconds.
	AskedP50    float64 `json:"asked_p50_s,omitempty"`
	AskedP99    float64 `json:"asked_p99_s,omitempty"`
	AnsweredP50 float64 `json:"answered_p50_s,omitempty"`
	AnsweredP99 float64 `json:"answered_p99_s,omitempty"`
	// Drops counts the datagrams the mdbus subscriber dropped, by reason
	// (subscriber.DropReason names), when any were.
	Drops map[string]uint64 `json:"drops,omitempty"`
	// CPUSeconds is the CPU time (user + system, getrusage) a
	// separate-process subscriber or ponger spent from ready to stop, and
	// WallSeconds that span.
	CPUSeconds  float64 `json:"cpu_s,omitempty"`
	WallSeconds float64 `json:"wall_s,omitempty"`
	// InlineSends and Packets: an mdbus ponger's publication's data
	// packets sent, and how many of them were sent inline
	// (publisher.Stats).
	InlineSends uint64 `json:"inline_sends,omitempty"`
	Error       string `json:"error,omitempty"`
}

// LatencyRun is one latency measurement.
type LatencyRun struct {
	Name   string  `json:"name"`
	System System  `json:"system"`
	Mode   string  `json:"mode"` // "one-way", "round-trip" or "ping-pong"
	Size   string  `json:"size"`
	Rate   float64 `json:"rate"` // offered messages/s
	Loss   float64 `json:"loss"`
	// Sent and Received count messages after the warm-up.
	Sent     uint64      `json:"sent"`
	Received uint64      `json:"received"`
	Lost     uint64      `json:"lost"`
	Total    Percentiles `json:"latency"`
	// Wire is the time from the scheduled send to the kernel's receive
	// timestamp, RecvPath from there to delivery (with --timestamps).
	Wire     *Percentiles `json:"wire,omitempty"`
	RecvPath *Percentiles `json:"recv_path,omitempty"`
	// Recovery is, with loss, the time from a gap's detection to the
	// delivery of its last message (repaired).
	Recovery *Percentiles `json:"recovery,omitempty"`
	// ClosedLoop: the ping-pong's rate and each side's CPU.
	ClosedLoop  *ClosedLoop `json:"closed_loop,omitempty"`
	Spectrum    []Point     `json:"spectrum,omitempty"`
	Series      string      `json:"series"`
	Interrupted bool        `json:"interrupted,omitempty"`
	Error       string      `json:"error,omitempty"`
	CPUSeconds  float64     `json:"cpu_s"`
}

// Percentiles summarise a latency histogram, in nanoseconds.
type Percentiles struct {
	Count       int64   `json:"count"`
	Min         int64   `json:"min"`
	Mean        float64 `json:"mean"`
	P50         int64   `json:"p50"`
	P90         int64   `json:"p90"`
	P99         int64   `json:"p99"`
	P999        int64   `json:"p99_9"`
	P9999       int64   `json:"p99_99"`
	Max         int64   `json:"max"`
	RangeErrors int64   `json:"range_errors"`
}

// Point is one step of a percentile spectrum: the value (ns) at quantile
// Q (0-100).
type Point struct {
	Q float64 `json:"q"`
	V int64   `json:"v"`
}

func percentiles(h *hdr.Histogram, rangeErrs int64) Percentiles {
	p := Percentiles{Count: h.TotalCount(), RangeErrors: rangeErrs}
	if p.Count == 0 {
		return p
	}
	v := h.ValueAtPercentiles([]float64{50, 90, 99, 99.9, 99.99})
	p.Min, p.Mean, p.Max = h.Min(), h.Mean(), h.Max()
	p.P50, p.P90, p.P99, p.P999, p.P9999 = v[50], v[90], v[99], v[99.9], v[99.99]
	return p
}

func spectrum(h *hdr.Histogram) []Point {
	if h.TotalCount() == 0 {
		return nil
	}
	var pts []Point
	for _, b := range h.CumulativeDistributionWithTicks(5) {
		pts = append(pts, Point{Q: b.Quantile, V: b.ValueAt})
	}
	return pts
}

// Ratio compares mdbus with raw UDP measured in the same run.
type Ratio struct {
	What  string  `json:"what"`
	Mdbus float64 `json:"mdbus"`
	Raw   float64 `json:"raw"`
	// Ratio is Mdbus / Raw.
	Ratio float64 `json:"ratio"`
}

// Goal is one of the performance targets (Goal*) and whether this run met it.
type Goal struct {
	Name     string `json:"name"`
	Target   string `json:"target"`
	Measured string `json:"measured"`
	Pass     bool   `json:"pass"`
	// PayloadSize is the mdbus packet size a throughput goal was judged
	// at.
	PayloadSize int `json:"payload_size,omitempty"`
	// Capacity (msgs/s) and Headroom (Capacity / the goal's rate), where
	// the capacity of the goal's cell is known.
	Capacity float64 `json:"capacity_msgs_per_s,omitempty"`
	Headroom float64 `json:"headroom,omitempty"`
}

func machine() Machine {
	m := Machine{Cores: runtime.NumCPU(), GoVersion: runtime.Version(), LoadStart: load1()}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(l, ":"); ok && strings.TrimSpace(k) == "model name" {
				m.CPU = strings.TrimSpace(v)
				break
			}
		}
	}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.Kernel = strings.TrimSpace(string(b))
	}
	return m
}

// load1 is the one-minute load average, or -1 when unknown.
func load1() float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return -1
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return -1
	}
	v, err := strconv.ParseFloat(f[0], 64)
	if err != nil {
		return -1
	}
	return v
}

func ratio(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return a / b
}
