package bench

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"
)

// recvSpec describes one receiver of a run. It crosses to separate-process
// subscribers as JSON, so every field is plain data.
type recvSpec struct {
	Name       string `json:"name"`
	System     System `json:"system"`
	Group      string `json:"group"`
	Interface  string `json:"interface"`
	ReadBuffer int    `json:"read_buffer"`
	BufSize    int    `json:"buf_size"`
	Timestamps bool   `json:"timestamps"`
	// BusyPoll in nanoseconds (Config.BusyPoll).
	BusyPoll int64   `json:"busy_poll,omitempty"`
	Loss     float64 `json:"loss"`
	// Retransmitter is where an mdbus subscriber sends re-requests;
	// empty: none.
	Retransmitter string `json:"retransmitter,omitempty"`
	Seed          uint64 `json:"seed"`
	// NoGRO: an mdbus subscriber's feed socket reads without UDP_GRO.
	NoGRO bool `json:"no_gro,omitempty"`
	// Procs, when positive, is the child's GOMAXPROCS (Config.SubProcs).
	Procs int `json:"procs,omitempty"`
	// SampleMask: the delivery time is read for messages whose sequence
	// has these bits clear (0: every message).
	SampleMask  uint64 `json:"sample_mask"`
	WarmupUntil int64  `json:"warmup_until"`
	// Latency records one-way latency into Series (tagged Tag in the
	// interval log).
	Latency  bool   `json:"latency"`
	Series   string `json:"series"`
	Tag      string `json:"tag"`
	Base     int64  `json:"base"`     // CLOCK_MONOTONIC ns of the interval log's time 0
	Interval int64  `json:"interval"` // ns
	// Deadline (CLOCK_MONOTONIC ns) stops a child that heard nothing
	// from its parent.
	Deadline int64 `json:"deadline"`
	// Pong, when set, makes the child a ponger instead of a receiver: it
	// answers every message of Group on this group, publishing with the
	// fields below.
	Pong        string `json:"pong,omitempty"`
	PayloadSize int    `json:"payload_size,omitempty"`
	WriteBuffer int    `json:"write_buffer,omitempty"`
	TTL         int    `json:"ttl,omitempty"`
	Inline      bool   `json:"inline,omitempty"`
}

// subHandle is a receiver in this process or in a child process.
type subHandle interface {
	ended() <-chan struct{}
	// stop ends the receiver, counts as missing what it did not get of
	// the sent messages, and returns its result. Histograms go to the
	// Bench's collector.
	stop(sent uint64) (SubResult, error)
}

// startReceiver builds a sink and a receiver for spec, recording into coll.
func startReceiver(spec recvSpec, coll *collector) (receiver, *sink, error) {
	sk := specSink(spec, coll)
	r, err := openReceiver(spec, sk)
	return r, sk, err
}

// specSink builds the sink of spec, recording into coll.
func specSink(spec recvSpec, coll *collector) *sink {
	sk := newSink()
	sk.sampleMask = spec.SampleMask
	sk.setWarmup(spec.WarmupUntil)
	now := Now()
	if spec.Latency {
		sk.lat = coll.recorder(spec.Series, spec.Tag, now)
		if spec.Timestamps {
			sk.wire = coll.recorder(spec.Series+"-wire", spec.Tag+".wire", now)
			sk.recvPath = coll.recorder(spec.Series+"-recvpath", spec.Tag+".recvpath", now)
			sk.rtOffset = realtimeOffset()
		}
	}
	if spec.System == Mdbus {
		sk.recovery = coll.recorder(spec.Series+"-recovery", spec.Tag+".recovery", now)
	}
	return sk
}

// recvParams resolves spec's receiving side.
func (spec recvSpec) recvParams() (recvParams, error) {
	group, err := netip.ParseAddrPort(spec.Group)
	if err != nil {
		return recvParams{}, fmt.Errorf("bench: group %q: %w", spec.Group, err)
	}
	ifi, err := net.InterfaceByName(spec.Interface)
	if err != nil {
		return recvParams{}, fmt.Errorf("bench: interface %q: %w", spec.Interface, err)
	}
	var rtx netip.AddrPort
	if spec.Retransmitter != "" {
		if rtx, err = netip.ParseAddrPort(spec.Retransmitter); err != nil {
			return recvParams{}, fmt.Errorf("bench: retransmitter %q: %w", spec.Retransmitter, err)
		}
	}
	return recvParams{
		group: group, retransmitter: rtx, ifi: ifi, readBuffer: spec.ReadBuffer, bufSize: spec.BufSize,
		timestamps: spec.Timestamps, busyPoll: time.Duration(spec.BusyPoll), noGRO: spec.NoGRO, loss: spec.Loss, seed: spec.Seed, logger: errLogger,
	}, nil
}

// startPonger starts the ponger of a Pong spec.
func (spec recvSpec) startPonger() (ponger, error) {
	rp, err := spec.recvParams()
	if err != nil {
		return nil, err
	}
	out, err := netip.ParseAddrPort(spec.Pong)
	if err != nil {
		return nil, fmt.Errorf("bench: pong group %q: %w", spec.Pong, err)
	}
	sp := sendParams{
		group: out, ifi: rp.ifi, ttl: spec.TTL, payloadSize: spec.PayloadSize, writeBuffer: spec.WriteBuffer,
		batch: rawBatch, inline: spec.Inline, logger: errLogger,
	}
	return startPonger(spec.System, rp, sp)
}

// openReceiver starts spec's receiver, delivering into sk.
func openReceiver(spec recvSpec, sk *sink) (receiver, error) {
	p, err := spec.recvParams()
	if err != nil {
		return nil, err
	}
	switch spec.System {
	case Mdbus:
		return newMdbusReceiver(p, sk)
	case Raw:
		return newRawReceiver(p, sk)
	case RawGSO:
		return newRawGSOReceiver(p, sk)
	}
	return nil, fmt.Errorf("%w: unknown system %q", ErrConfig, spec.System)
}

// localSub is a receiver in this process.
type localSub struct {
	name string
	r    receiver
	sk   *sink
}

func (l *localSub) ended() <-chan struct{} { return l.r.ended() }

func (l *localSub) stop(sent uint64) (SubResult, error) {
	res := SubResult{Name: l.name}
	err := l.r.close()
	l.sk.tail(sent)
	l.sk.flush(Now())
	l.sk.result(&res)
	l.r.counters(&res)
	res.Error = errString(err)
	return res, err
}

// ---- separate-process subscribers ----

// childResult is what a child prints as its last line.
type childResult struct {
	Sub    SubResult  `json:"sub"`
	Series []exported `json:"series"`
	HLog   string     `json:"hlog"`
	Error  string     `json:"error,omitempty"`
}

// procSub is a receiver in a child process. Protocol on the child's
// standard streams, one line each:
//
//	child → parent   ready            joined, receiving
//	child → parent   ended            the end of the run arrived
//	parent → child   warmup T         the warm-up ends at T (CLOCK_MONOTONIC ns)
//	parent → child   stop SENT        stop; SENT messages were sent
//	child → parent   {json}           childResult, then the child exits
type procSub struct {
	name  string
	cmd   *exec.Cmd
	in    io.WriteCloser
	lines chan string
	end   chan struct{}
	res   chan string
	coll  *collector
	wg    sync.WaitGroup
}

func startProc(ctx context.Context, spawn func([]string) *exec.Cmd, spec recvSpec, coll *collector) (*procSub, error) {
	js, err := json.Marshal(spec)
	if err != nil {
		return nil, err
	}
	cmd := spawn([]string{"-spec", string(js)})
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if cmd.Stderr == nil {
		cmd.Stderr = stderrPrefix{spec.Name}
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("bench: start subscriber process: %w", err)
	}
	p := &procSub{name: spec.Name, cmd: cmd, in: in, end: make(chan struct{}), res: make(chan string, 1), coll: coll}
	ready := make(chan struct{})
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		defer close(p.res)
		sc := bufio.NewScanner(out)
		sc.Buffer(make([]byte, 64<<10), 256<<20)
		readyOnce, endOnce := sync.Once{}, sync.Once{}
		defer readyOnce.Do(func() { close(ready) })
		for sc.Scan() {
			switch line := sc.Text(); {
			case line == "ready":
				readyOnce.Do(func() { close(ready) })
			case line == "ended":
				endOnce.Do(func() { close(p.end) })
			case strings.HasPrefix(line, "{"):
				p.res <- line
				return
			}
		}
	}()
	select {
	case <-ready:
	case <-time.After(10 * time.Second):
		p.kill()
		return nil, fmt.Errorf("bench: subscriber process %s did not start within 10s", spec.Name)
	case <-ctx.Done():
		p.kill()
		return nil, ctx.Err()
	}
	if p.cmd.ProcessState != nil {
		return nil, fmt.Errorf("bench: subscriber process %s exited at start", spec.Name)
	}
	return p, nil
}

func (p *procSub) kill() {
	_ = p.cmd.Process.Kill()
	_ = p.in.Close()
	p.wg.Wait()
	_ = p.cmd.Wait()
}

func (p *procSub) ended() <-chan struct{} { return p.end }

func (p *procSub) stop(sent uint64) (SubResult, error) {
	res := SubResult{Name: p.name}
	fmt.Fprintf(p.in, "stop %d\n", sent)
	var line string
	select {
	case line = <-p.res:
	case <-time.After(30 * time.Second):
		p.kill()
		res.Error = "subscriber process gave no result within 30s"
		return res, errors.New("bench: " + res.Error)
	}
	p.in.Close()
	p.wg.Wait()
	werr := p.cmd.Wait()
	if line == "" {
		res.Error = fmt.Sprintf("subscriber process exited without a result (%v)", werr)
		return res, errors.New("bench: " + res.Error)
	}
	var cr childResult
	if err := json.Unmarshal([]byte(line), &cr); err != nil {
		res.Error = "bad result from subscriber process: " + err.Error()
		return res, errors.New("bench: " + res.Error)
	}
	if err := p.coll.importChild(cr.Series, cr.HLog); err != nil {
		return cr.Sub, err
	}
	cr.Sub.Name = p.name
	if cr.Error != "" {
		return cr.Sub, errors.New(cr.Error)
	}
	return cr.Sub, nil
}

// stderrPrefix passes a child's standard error through, line-prefixed.
type stderrPrefix struct{ name string }

func (s stderrPrefix) Write(b []byte) (int, error) {
	for _, l := range strings.Split(strings.TrimRight(string(b), "\n"), "\n") {
		fmt.Fprintf(stderrW, "[%s] %s\n", s.name, l)
	}
	return len(b), nil
}

// ChildMain is the body of a separate-process subscriber ("mdbus bench
// _child -spec JSON"): it receives as the spec says, talks to its parent on
// stdin and stdout (see procSub) and returns when told to stop, when stdin
// closes, when ctx ends or at the spec's deadline.
func ChildMain(ctx context.Context, args []string, stdin io.Reader, stdout io.Writer) error {
	var specJSON string
	for i := 0; i < len(args); i++ {
		if (args[i] == "-spec" || args[i] == "--spec") && i+1 < len(args) {
			specJSON = args[i+1]
			i++
		}
	}
	if specJSON == "" {
		return fmt.Errorf("%w: _child needs -spec JSON (it is started by mdbus bench, not by hand)", ErrConfig)
	}
	var spec recvSpec
	if err := json.Unmarshal([]byte(specJSON), &spec); err != nil {
		return fmt.Errorf("%w: _child spec: %v", ErrConfig, err)
	}
	useProcs(spec.Procs)
	coll := newCollector(spec.Base, time.Duration(spec.Interval))
	defer coll.close()
	var (
		r    receiver
		sk   *sink
		pong ponger
		err  error
	)
	if spec.Pong != "" {
		pong, err = spec.startPonger()
	} else {
		r, sk, err = startReceiver(spec, coll)
	}
	if err != nil {
		return err
	}
	var mu sync.Mutex
	say := func(s string) {
		mu.Lock()
		fmt.Fprintln(stdout, s)
		mu.Unlock()
	}
	say("ready")
	cpu0, wall0 := cpuSeconds(), Now()
	stopCh := make(chan uint64, 1)
	go func() {
		sc := bufio.NewScanner(stdin)
		for sc.Scan() {
			f := strings.Fields(sc.Text())
			if len(f) != 2 {
				continue
			}
			n, _ := strconv.ParseInt(f[1], 10, 64)
			switch f[0] {
			case "warmup":
				if sk != nil {
					sk.setWarmup(n)
				}
			case "stop":
				stopCh <- uint64(n)
				return
			}
		}
		close(stopCh)
	}()
	deadline := time.Duration(spec.Deadline - Now())
	if deadline <= 0 {
		deadline = time.Minute
	}
	timer := time.NewTimer(deadline)
	defer timer.Stop()
	var sent uint64
	var endSeen <-chan struct{} // a ponger never ends by itself
	if r != nil {
		endSeen = r.ended()
	}
wait:
	for {
		select {
		case <-endSeen:
			say("ended")
			endSeen = nil
		case n := <-stopCh:
			sent = n
			break wait
		case <-ctx.Done():
			// The parent is interrupted too: wait briefly for its stop.
			select {
			case n := <-stopCh:
				sent = n
			case <-time.After(DefaultDrain + 3*time.Second):
			}
			break wait
		case <-timer.C:
			break wait
		}
	}
	res := SubResult{Name: spec.Name}
	var cerr error
	if pong != nil {
		cerr = pong.close()
		res.Messages = pong.echoed()
		if mp, ok := pong.(*mdbusPonger); ok {
			st := mp.pub.Stats()
			res.Packets, res.InlineSends = st.Packets, st.InlineSends
		}
	} else {
		cerr = r.close()
		sk.tail(sent)
		sk.flush(Now())
		sk.result(&res)
		r.counters(&res)
	}
	res.CPUSeconds, res.WallSeconds = cpuSeconds()-cpu0, float64(Now()-wall0)/1e9
	res.Procs = runtime.GOMAXPROCS(0)
	coll.close()
	series, hlog, xerr := coll.export()
	cr := childResult{Sub: res, Series: series, HLog: hlog, Error: errString(errors.Join(cerr, xerr))}
	js, err := json.Marshal(cr)
	if err != nil {
		return err
	}
	say(string(js))
	return nil
}
