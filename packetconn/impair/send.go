package impair

import (
	"errors"
	"fmt"
	"net/netip"
	"sync"
	"time"

	"github.com/mdbus/mdbus/internal/monotime"
	"github.com/mdbus/mdbus/internal/sock"
)

// outBatchLen is how many datagrams a Sender passes to one inner
// WriteBatch.
const outBatchLen = 64

// sendSide impairs what WriteBatch and WriteTo send. mu guards all of it;
// the inner conn's writes happen under mu, so they never run concurrently.
type sendSide struct {
	c  *Conn
	mu sync.Mutex
	e  engine
	// ob is the outgoing batch: its Bufs point at the caller's datagrams
	// (valid during the call) or at slots. oslot and osrc say which, per
	// entry; on counts the entries.
	ob    *sock.Batch
	oslot [outBatchLen]int32
	osrc  [outBatchLen]int32
	on    int
	one   [1]sock.Message // WriteTo's datagram as a batch
	// closing is set under mu when Close starts flushing.
	closing bool
	bgErr   error // first background send error

	// The release goroutine (only when something can be held): it wakes
	// on kick (a held datagram is due before armed) or its timer.
	kick       chan struct{}
	quit, done chan struct{}
	armed      monotime.Time
	armedSet   bool
}

func newSendSide(c *Conn, s settings, stream uint64) *sendSide {
	ss := &sendSide{c: c, ob: sock.NewBatch(outBatchLen, 0)}
	// Held copies, plus every slot the out batch may reference, plus the
	// two copies of the datagram being admitted; see engine.hold.
	ss.e.init(s, &c.st, stream, s.MaxHeld+outBatchLen+2, s.MaxHeld+8)
	if s.holds {
		ss.kick = make(chan struct{}, 1)
		ss.quit = make(chan struct{})
		ss.done = make(chan struct{})
		go ss.loop()
	}
	return ss
}

func (s *sendSide) writeBatch(msgs []sock.Message) (int, error) {
	if s.c.closed.Load() {
		return 0, ErrClosed
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closing {
		return 0, ErrClosed
	}
	return s.admitLocked(msgs)
}

func (s *sendSide) writeTo(p []byte, to netip.AddrPort) error {
	if s.c.closed.Load() {
		return ErrClosed
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closing {
		return ErrClosed
	}
	s.one[0] = sock.Message{Buf: p, Addr: to}
	_, err := s.admitLocked(s.one[:])
	s.one[0] = sock.Message{}
	return err
}

// admitLocked sends what is due, then msgs through the pipeline, and
// flushes. On a write error it returns how many of msgs were processed
// before the first of them that was not sent.
func (s *sendSide) admitLocked(msgs []sock.Message) (int, error) {
	e := &s.e
	defer func() { s.c.st.held.Store(uint64(e.held())) }()
	now := monotime.Now()
	e.promote(now)
	if first, err := s.drain(msgs); err != nil {
		return first, err
	}
	for i := range msgs {
		e.admit(&msgs[i], int32(i), now)
		if first, err := s.drain(msgs); err != nil {
			return min(first, i+1), err
		}
	}
	if first, err := s.flush(); err != nil {
		return min(first, len(msgs)), err
	}
	if due, ok := e.nextDue(); ok && (!s.armedSet || due < s.armed) {
		s.armed, s.armedSet = due, true
		select {
		case s.kick <- struct{}{}:
		default:
		}
	}
	return len(msgs), nil
}

// drain moves the engine's outs into the out batch, flushing it when
// full. msgs is the caller's input the items refer to.
func (s *sendSide) drain(msgs []sock.Message) (int, error) {
	e := &s.e
	for {
		it, ok := e.next()
		if !ok {
			return len(msgs), nil
		}
		if s.on == len(s.ob.Msgs) {
			if first, err := s.flush(); err != nil {
				// Drop what is left: its turn has passed.
				for it, ok := it, true; ok; it, ok = e.next() {
					if it.slot >= 0 {
						e.freeSlot(it.slot)
					}
				}
				return first, err
			}
		}
		m := &s.ob.Msgs[s.on]
		if it.slot >= 0 {
			sm := &e.slots[it.slot].msg
			m.Buf, m.Addr = sm.Buf, sm.Addr
		} else {
			m.Buf, m.Addr = msgs[it.src].Buf, msgs[it.src].Addr
		}
		s.oslot[s.on], s.osrc[s.on] = it.slot, it.src
		s.on++
	}
}

// flush sends the out batch and frees its slots. On error it returns the
// smallest caller index among the datagrams not sent (or a large number
// when all of those were held ones).
func (s *sendSide) flush() (int, error) {
	if s.on == 0 {
		return int(^uint(0) >> 1), nil
	}
	sent, err := s.c.inner.WriteBatch(s.ob, s.on)
	sent = max(0, min(sent, s.on))
	s.c.st.out.Add(uint64(sent))
	first := int(^uint(0) >> 1)
	for j := range s.on {
		if err != nil && j >= sent && s.osrc[j] >= 0 {
			first = min(first, int(s.osrc[j]))
		}
		if s.oslot[j] >= 0 {
			s.e.freeSlot(s.oslot[j])
		}
		s.ob.Msgs[j].Buf = nil // do not keep the caller's buffer
	}
	s.on = 0
	if err != nil {
		return first, fmt.Errorf("impair: send: %w", err)
	}
	return first, nil
}

// loop sends held datagrams when they fall due, even if no further
// WriteBatch comes.
func (s *sendSide) loop() {
	defer close(s.done)
	t := time.NewTimer(time.Hour)
	t.Stop()
	for {
		select {
		case <-s.quit:
			t.Stop()
			return
		case <-s.kick:
		case <-t.C:
		}
		s.mu.Lock()
		now := monotime.Now()
		s.e.promote(now)
		_, err := s.drain(nil)
		if err == nil {
			_, err = s.flush()
		}
		if err != nil {
			s.c.st.sendErrors.Add(1)
			if s.bgErr == nil {
				s.bgErr = err
			}
		}
		s.c.st.held.Store(uint64(s.e.held()))
		due, ok := s.e.nextDue()
		s.armed, s.armedSet = due, ok
		s.mu.Unlock()
		if ok {
			t.Reset(max(0, due.Sub(now)))
		} else {
			t.Stop()
		}
	}
}

// close stops the goroutine, sends everything held at once, and closes the
// inner conn.
func (s *sendSide) close() error {
	if s.quit != nil {
		close(s.quit)
		<-s.done
	}
	s.mu.Lock()
	s.closing = true
	for s.e.force() {
	}
	_, err := s.drain(nil)
	if err == nil {
		_, err = s.flush()
	}
	s.c.st.held.Store(0)
	bg := s.bgErr
	s.mu.Unlock()
	if cerr := s.c.inner.Close(); cerr != nil {
		err = errors.Join(err, fmt.Errorf("impair: close: %w", cerr))
	}
	return errors.Join(bg, err)
}
