//go:build linux

package sock

import (
	"encoding/binary"
	"net"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// GRO receive: see "UDP GRO" in the package documentation.

const (
	// groSlots is how many trains one recvmmsg reads on a UDP_GRO socket.
	groSlots = 8
	// groSlotSize fits the largest train the kernel coalesces (an skb of
	// at most 64 KiB) and the largest plain UDP datagram (65,507 bytes
	// over IPv4). groSlots*groSlotSize = 512 KiB per socket.
	groSlotSize = 1 << 16
	// groOOBSize fits oobSize's control messages and UDP_GRO's.
	groOOBSize = oobSize + 64
)

// train is one received skb: a datagram, or with a UDP_GRO control message
// several of Seg bytes each (the last may be shorter).
type train struct {
	// n is the bytes received; seg the segment size (0: one datagram).
	n, seg int
	// trunc is MSG_TRUNC: the kernel had more than the slot held.
	trunc bool
	// drops is SO_RXQ_OVFL's count when the train carried it, else 0.
	drops uint32
	// meta carries the source, destination, interface and kernel time
	// shared by every segment.
	meta Message
}

// groReader is a UDP_GRO socket's receive state: its own recvmmsg slots,
// the trains of the last read and how far the caller has taken them.
type groReader struct {
	hdrs   []mmsghdr
	iovs   []unix.Iovec
	names  []unix.RawSockaddrInet6
	oob    []byte
	buf    []byte
	trains []train
	// n is how many trains the last read returned; next is the first not
	// wholly handed out, off the offset in it where the caller resumes.
	n, next, off int
	// scratch receives parseOOB's SO_RXQ_OVFL count.
	scratch Batch
	// reads and datagrams count what the kernel handed over (skbs) and
	// what ReadBatch handed out; written by the reader, read by GROStats.
	reads, datagrams atomic.Uint64
}

func newGROReader() *groReader {
	g := &groReader{
		hdrs:   make([]mmsghdr, groSlots),
		iovs:   make([]unix.Iovec, groSlots),
		names:  make([]unix.RawSockaddrInet6, groSlots),
		oob:    make([]byte, groSlots*groOOBSize),
		buf:    make([]byte, groSlots*groSlotSize),
		trains: make([]train, groSlots),
	}
	for i := range g.iovs {
		g.iovs[i] = unix.Iovec{Base: &g.buf[i*groSlotSize], Len: groSlotSize}
	}
	return g
}

// enableGRO asks the kernel to coalesce. It reports false where the kernel
// refuses (before Linux 5.0, or a socket type without it): the Conn then
// reads plain. A variable so a test can play an old kernel.
var enableGRO = func(fd int) bool {
	return unix.SetsockoptInt(fd, unix.SOL_UDP, unix.UDP_GRO, 1) == nil
}

// GRO reports whether the socket receives with UDP_GRO: Config.GRO was set
// and the kernel accepted it.
func (c *Conn) GRO() bool { return c.sys.gro != nil }

// GROStats returns the socket's GRO counters; safe to call concurrently
// with ReadBatch.
func (c *Conn) GROStats() GROStats {
	g := c.sys.gro
	if g == nil {
		return GROStats{}
	}
	return GROStats{On: true, Reads: g.reads.Load(), Datagrams: g.datagrams.Load()}
}

// readGRO is ReadBatch on a UDP_GRO socket: it hands out the segments
// still held from the last read, or reads up to groSlots trains (blocking
// like ReadBatch) and hands out their segments, one Message each, copied
// into b's buffers. Segments that do not fit in b stay for the next call.
func (c *Conn) readGRO(b *Batch) (int, error) {
	g := c.sys.gro
	if len(b.Msgs) == 0 {
		return 0, nil
	}
	if g.next >= g.n {
		g.n, g.next, g.off = 0, 0, 0
		for i := range g.hdrs {
			g.hdrs[i] = mmsghdr{hdr: unix.Msghdr{
				Name:       (*byte)(unsafe.Pointer(&g.names[i])),
				Namelen:    unix.SizeofSockaddrInet6,
				Iov:        &g.iovs[i],
				Iovlen:     1,
				Control:    &g.oob[i*groOOBSize],
				Controllen: groOOBSize,
			}}
		}
		c.sys.rHdrs = g.hdrs
		if err := c.sys.rc.Read(c.sys.readFn); err != nil {
			return 0, &net.OpError{Op: "recvmmsg", Net: "udp", Err: err}
		}
		if c.sys.rErr != 0 {
			return 0, &net.OpError{Op: "recvmmsg", Net: "udp", Err: c.sys.rErr}
		}
		for i := range c.sys.rN {
			h := &g.hdrs[i]
			t := &g.trains[i]
			t.n = min(int(h.n), groSlotSize)
			t.trunc = h.hdr.Flags&unix.MSG_TRUNC != 0
			t.meta = Message{Addr: parseName(&g.names[i])}
			oob := g.oob[i*groOOBSize : i*groOOBSize+min(int(h.hdr.Controllen), groOOBSize)]
			g.scratch.Drops = 0
			parseOOB(oob, &t.meta, &g.scratch)
			t.drops = g.scratch.Drops
			t.seg = groSegment(oob)
		}
		g.n = c.sys.rN
		g.reads.Add(uint64(g.n))
	}
	k := g.fill(b)
	g.datagrams.Add(uint64(k))
	return k, nil
}

// fill hands out held segments into b.Msgs, in order, and returns how many:
// each as a slice of its slot (see the package doc), or, longer than its
// message's buffer b.Buffer(k), copied there, cut and marked Truncated. The
// last segment of a train the kernel truncated is marked Truncated too.
func (g *groReader) fill(b *Batch) int {
	k := 0
	for k < len(b.Msgs) && g.next < g.n {
		t := &g.trains[g.next]
		data := g.buf[g.next*groSlotSize : g.next*groSlotSize+t.n]
		seg := t.seg
		if seg <= 0 || seg > t.n {
			seg = t.n // one datagram (also a hostile or absent size)
		}
		if g.off == 0 && t.drops != 0 {
			b.Drops = t.drops
		}
		end := min(g.off+seg, t.n)
		dst := b.Buffer(k)
		m := &b.Msgs[k]
		*m = t.meta
		// Capped at the segment's end: an append to Buf cannot run into
		// the next datagram.
		if d := data[g.off:end:end]; len(d) <= len(dst) {
			m.Buf = d
			m.Truncated = t.trunc && end == t.n
		} else {
			c := copy(dst, d)
			m.Buf = dst[:c]
			m.Truncated = true
		}
		k++
		g.off = end
		if g.off >= t.n {
			g.next++
			g.off = 0
		}
	}
	return k
}

// groSegment returns the segment size of a UDP_GRO control message in oob
// (the kernel writes an int), or 0 when there is none: then the read holds
// one datagram.
func groSegment(oob []byte) int {
	for len(oob) >= unix.SizeofCmsghdr {
		h := (*unix.Cmsghdr)(unsafe.Pointer(&oob[0]))
		l := int(h.Len)
		if l < unix.SizeofCmsghdr || l > len(oob) {
			return 0
		}
		data := oob[unix.SizeofCmsghdr:l]
		if h.Level == unix.SOL_UDP && h.Type == unix.UDP_GRO {
			switch {
			case len(data) >= 4:
				return int(int32(binary.NativeEndian.Uint32(data)))
			case len(data) >= 2:
				return int(binary.NativeEndian.Uint16(data))
			}
			return 0
		}
		next := (l + 7) &^ 7
		if next >= len(oob) {
			return 0
		}
		oob = oob[next:]
	}
	return 0
}
