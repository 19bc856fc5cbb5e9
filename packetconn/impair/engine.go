package impair

import (
	"math/rand/v2"
	"sync/atomic"
	"time"

	"github.com/mdbus/mdbus/internal/monotime"
	"github.com/mdbus/mdbus/internal/sock"
)

// drawsPerDatagram is how many generator outputs every impaired datagram
// consumes, whatever is decided, so that decision i depends only on the
// seed and i.
const drawsPerDatagram = 6

// minSlotBuf is the smallest buffer a slot gets, so that most datagrams of
// a 1500-byte MTU fit the first buffer a slot is given.
const minSlotBuf = 2048

// decision is what happens to one datagram: index 0 of reorder and delay is
// the original, index 1 the duplicate.
type decision struct {
	lost, dup bool
	reorder   [2]bool
	delay     [2]time.Duration
}

// slot holds a copy of one datagram that the engine keeps past the call
// that brought it.
type slot struct {
	msg sock.Message // msg.Buf is buf[:len]
	buf []byte       // the slot's own storage, kept across uses
	// leaveAt is the arrival count at which a reordered copy leaves the
	// reorder stage.
	leaveAt uint64
	// due is the reorder wait bound (reorder stage) or release time
	// (delay stage).
	due monotime.Time
	// delay is the latency to add when the copy leaves the reorder stage.
	delay time.Duration
	ord   uint64 // delay-stage tie break: order of entry
}

// item is one datagram ready to leave: a slot, or (slot < 0) message src of
// the input the engine was handed.
type item struct {
	slot, src int32
}

// counters are Stats as atomics, so Stats can be read from any goroutine.
type counters struct {
	seen, dropped, ruleDropped, duplicated, reordered, delayed,
	forced, exempt, out, held, sendErrors atomic.Uint64
}

func (c *counters) snapshot() Stats {
	return Stats{
		Seen: c.seen.Load(), Dropped: c.dropped.Load(), RuleDropped: c.ruleDropped.Load(),
		Duplicated: c.duplicated.Load(), Reordered: c.reordered.Load(), Delayed: c.delayed.Load(),
		Forced: c.forced.Load(), Exempt: c.exempt.Load(), Out: c.out.Load(), Held: c.held.Load(),
		SendErrors: c.sendErrors.Load(),
	}
}

// engine is the impairment pipeline shared by both sides:
//
//	rule -> loss -> duplicate -> reorder stage (FIFO) -> delay stage (heap) -> outs
//
// It decides, holds copies in slots and appends what may leave to outs; the
// side drains outs (copying into the caller's batch, or sending) and frees
// the slots. It is not safe for concurrent use.
type engine struct {
	s  settings
	st *counters
	// rng is the decision source; decideHook replaces it in tests.
	rng        rand.PCG
	decideHook func() decision

	slots []slot
	free  []int32 // stack of free slot indices
	// fifo is the reorder stage: a ring of slot indices in entry order,
	// so both leaveAt and due grow from head to tail.
	fifo        []int32
	fhead, flen int
	// heap is the delay stage: a min-heap of slot indices by (due, ord).
	heap []int32
	// arrivals counts copies that entered the reorder stage.
	arrivals uint64
	ord      uint64
	// outs[ohead:] is what may leave, in order.
	outs  []item
	ohead int
}

func splitmix(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

// init sets up an engine with nslots slots and room for outCap items
// before outs has to grow.
func (e *engine) init(s settings, st *counters, stream uint64, nslots, outCap int) {
	e.s, e.st = s, st
	e.rng.Seed(splitmix(s.Seed), splitmix(stream^0x5deece66d))
	e.fifo = make([]int32, s.MaxHeld)
	e.heap = make([]int32, 0, s.MaxHeld)
	e.outs = make([]item, 0, outCap)
	e.grow(nslots)
}

// grow makes the engine have at least n slots. Slot buffers are allocated
// on first use and kept.
func (e *engine) grow(n int) {
	if n <= len(e.slots) {
		return
	}
	old := len(e.slots)
	e.slots = append(e.slots, make([]slot, n-old)...)
	free := make([]int32, len(e.free), n)
	copy(free, e.free)
	for i := n - 1; i >= old; i-- {
		free = append(free, int32(i))
	}
	e.free = free
}

// growOuts makes room for n items in outs; only call with outs empty.
func (e *engine) growOuts(n int) {
	if cap(e.outs) < n {
		e.outs = make([]item, 0, n)
		e.ohead = 0
	}
}

func (e *engine) held() int { return e.flen + len(e.heap) }

// pending is how many items wait in outs.
func (e *engine) pending() int { return len(e.outs) - e.ohead }

func unit(x uint64) float64 { return float64(x>>11) * 0x1p-53 }

func (e *engine) decide() decision {
	if e.decideHook != nil {
		return e.decideHook()
	}
	var u [drawsPerDatagram]float64
	for i := range u {
		u[i] = unit(e.rng.Uint64())
	}
	c := &e.s.Config
	return decision{
		lost:    u[0] < c.Loss,
		dup:     u[1] < c.Duplicate,
		reorder: [2]bool{u[2] < c.Reorder, u[4] < c.Reorder},
		delay: [2]time.Duration{
			c.Delay + time.Duration(u[3]*float64(c.Jitter)),
			c.Delay + time.Duration(u[5]*float64(c.Jitter)),
		},
	}
}

// admit runs message src of the input, m, through the pipeline at now.
func (e *engine) admit(m *sock.Message, src int32, now monotime.Time) {
	e.st.seen.Add(1)
	exempt := e.s.OnlyData && !IsData(m.Buf)
	var d decision
	if !exempt {
		d = e.decide()
	}
	if e.s.Drop != nil && e.s.Drop(m.Buf) {
		e.st.ruleDropped.Add(1)
		return
	}
	if exempt {
		e.st.exempt.Add(1)
		e.emit(-1, src)
		return
	}
	if d.lost {
		e.st.dropped.Add(1)
		return
	}
	e.enter(m, src, d.reorder[0], d.delay[0], now)
	if d.dup {
		e.st.duplicated.Add(1)
		e.enter(m, src, d.reorder[1], d.delay[1], now)
	}
}

// enter runs one copy through the reorder stage, then releases the
// reordered copies it was the last awaited arrival for.
func (e *engine) enter(m *sock.Message, src int32, reorder bool, delay time.Duration, now monotime.Time) {
	e.arrivals++
	held := false
	if reorder {
		if i := e.hold(m); i >= 0 {
			e.st.reordered.Add(1)
			sl := &e.slots[i]
			sl.leaveAt = e.arrivals + uint64(e.s.ReorderDepth)
			sl.due = now.Add(e.s.ReorderWait)
			sl.delay = delay
			e.fifo[(e.fhead+e.flen)%len(e.fifo)] = i
			e.flen++
			held = true
		}
	}
	if !held {
		e.toDelay(-1, src, m, delay, now)
	}
	for e.flen > 0 {
		i := e.fifo[e.fhead]
		if e.slots[i].leaveAt > e.arrivals {
			break
		}
		e.popFIFO()
		e.toDelay(i, -1, nil, e.slots[i].delay, now)
	}
}

// toDelay runs a copy that left the reorder stage at base through the
// delay stage: a slot i, or (i < 0) message src of the input, m.
func (e *engine) toDelay(i, src int32, m *sock.Message, delay time.Duration, base monotime.Time) {
	if delay <= 0 {
		e.emit(i, src)
		return
	}
	if i < 0 {
		if i = e.hold(m); i < 0 {
			e.emit(-1, src) // no slot at all: pass undelayed
			return
		}
	}
	e.st.delayed.Add(1)
	sl := &e.slots[i]
	sl.due = base.Add(delay)
	sl.ord = e.ord
	e.ord++
	e.pushHeap(i)
}

// hold copies m into a free slot and returns it, first releasing the held
// copy due soonest when MaxHeld are held. It returns -1 when no slot is
// free (the side's sizing makes this impossible; the caller then passes m
// on instead).
func (e *engine) hold(m *sock.Message) int32 {
	if e.held() >= e.s.MaxHeld {
		e.force()
	}
	if len(e.free) == 0 {
		return -1
	}
	i := e.free[len(e.free)-1]
	e.free = e.free[:len(e.free)-1]
	sl := &e.slots[i]
	if cap(sl.buf) < len(m.Buf) {
		sl.buf = make([]byte, 0, max(len(m.Buf), minSlotBuf))
	}
	sl.buf = append(sl.buf[:0], m.Buf...)
	sl.msg = *m
	sl.msg.Buf = sl.buf
	return i
}

// force releases the held copy due soonest at once, skipping any wait or
// delay it has left. It reports whether one was held.
func (e *engine) force() bool {
	i, fromFIFO, ok := e.soonest()
	if !ok {
		return false
	}
	if fromFIFO {
		e.popFIFO()
	} else {
		e.popHeap()
	}
	e.st.forced.Add(1)
	e.emit(i, -1)
	return true
}

// soonest returns the held slot due first: the reorder FIFO's head or the
// delay heap's top.
func (e *engine) soonest() (i int32, fromFIFO, ok bool) {
	switch {
	case e.flen == 0 && len(e.heap) == 0:
		return -1, false, false
	case len(e.heap) == 0:
		return e.fifo[e.fhead], true, true
	case e.flen == 0:
		return e.heap[0], false, true
	}
	f, h := e.fifo[e.fhead], e.heap[0]
	if e.slots[f].due <= e.slots[h].due {
		return f, true, true
	}
	return h, false, true
}

// nextDue is when the next held copy is due, if any is held.
func (e *engine) nextDue() (monotime.Time, bool) {
	i, _, ok := e.soonest()
	if !ok {
		return 0, false
	}
	return e.slots[i].due, true
}

// promote releases every held copy due by now, in order of due time: a
// reordered copy whose wait ran out enters the delay stage (its delay
// counted from the wait's end), a delayed copy leaves.
func (e *engine) promote(now monotime.Time) {
	for {
		i, fromFIFO, ok := e.soonest()
		if !ok || e.slots[i].due > now {
			return
		}
		if fromFIFO {
			e.popFIFO()
			sl := &e.slots[i]
			e.toDelay(i, -1, nil, sl.delay, sl.due)
		} else {
			e.popHeap()
			e.emit(i, -1)
		}
	}
}

func (e *engine) emit(i, src int32) { e.outs = append(e.outs, item{slot: i, src: src}) }

// next returns the next item to leave.
func (e *engine) next() (item, bool) {
	if e.ohead == len(e.outs) {
		e.outs, e.ohead = e.outs[:0], 0
		return item{}, false
	}
	it := e.outs[e.ohead]
	e.ohead++
	if e.ohead == len(e.outs) {
		e.outs, e.ohead = e.outs[:0], 0
	}
	return it, true
}

func (e *engine) freeSlot(i int32) { e.free = append(e.free, i) }

func (e *engine) popFIFO() {
	e.fhead = (e.fhead + 1) % len(e.fifo)
	e.flen--
}

func (e *engine) less(a, b int32) bool {
	sa, sb := &e.slots[a], &e.slots[b]
	return sa.due < sb.due || sa.due == sb.due && sa.ord < sb.ord
}

func (e *engine) pushHeap(i int32) {
	e.heap = append(e.heap, i)
	h := e.heap
	for j := len(h) - 1; j > 0; {
		p := (j - 1) / 2
		if !e.less(h[j], h[p]) {
			break
		}
		h[j], h[p] = h[p], h[j]
		j = p
	}
}

func (e *engine) popHeap() {
	h := e.heap
	n := len(h) - 1
	h[0] = h[n]
	h = h[:n]
	for j := 0; ; {
		l, r, m := 2*j+1, 2*j+2, j
		if l < n && e.less(h[l], h[m]) {
			m = l
		}
		if r < n && e.less(h[r], h[m]) {
			m = r
		}
		if m == j {
			break
		}
		h[j], h[m] = h[m], h[j]
		j = m
	}
	e.heap = h
}
