//go:build linux

package sock

import (
	"encoding/binary"
	"errors"
	"net"
	"sync/atomic"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// UDP generic segmentation offload on the send side: WriteBatch hands the
// kernel a run of equal-length datagrams to one address as one message (a
// "train": one iovec per datagram and a UDP_SEGMENT control message giving
// the segment size), and the kernel cuts it into datagrams as late as it
// can, on lo or a veth at the receiving socket, on a NIC with
// segmentation offload in hardware. The kernel's per-call and per-message
// cost (socket lookup, route, skb and queueing) is then paid once per
// train instead of once per datagram.
const (
	// maxGSOSegments is the kernel's limit on datagrams per train
	// (UDP_MAX_SEGMENTS in include/linux/udp.h).
	maxGSOSegments = 64
	// maxGSOBytesIPv4 is the largest UDP payload of an IPv4 train: the
	// 65,535-byte datagram limit less the IPv4 (20) and UDP (8) headers.
	maxGSOBytesIPv4 = 65535 - 20 - 8
	// maxGSOBytesIPv6 is the largest UDP payload of an IPv6 train: the
	// IPv6 payload length (65,535) counts the UDP header but not the
	// 40-byte IPv6 header.
	maxGSOBytesIPv6 = 65535 - 8
	// gsoTrainBytes caps a train below both limits: trains of 65,500
	// bytes (50 packets of 1,310 bytes: 256-byte messages in 1472-byte
	// packets) took a kernel path three times slower per packet than
	// trains of 64,000 bytes or less (kernel 6.18, lo to a UDP_GRO
	// socket; mdbus bench capacity --size 256: 1.23M msgs/s against
	// 3.85M with this cap, 3.25M with 32 KiB trains), likely the buffer
	// for the whole train passing 64 KiB with its headers. 64,000 bytes
	// still carries 43 full 1472-byte packets.
	gsoTrainBytes = 64000
)

// segCmsgLen is the size of the UDP_SEGMENT control message (a uint16
// segment size), padded as the kernel walks control messages.
var segCmsgLen = unix.CmsgSpace(2)

// gsoState is a Conn's GSO switch and counters. Only WriteBatch changes
// on; GSOStats may read everything from any goroutine.
type gsoState struct {
	on        atomic.Bool
	maxBytes  int
	trains    atomic.Uint64
	segments  atomic.Uint64
	fallbacks atomic.Uint64
	reason    atomic.Uint32 // the syscall.Errno that turned GSO off
	// fault, set by tests before the first WriteBatch, replaces the
	// kernel's answer to every train with this error, to exercise the
	// fallback on a kernel that accepts trains.
	fault syscall.Errno
}

// GSOStats returns the Conn's GSO state and counters. It is safe to call
// concurrently with WriteBatch.
func (c *Conn) GSOStats() GSOStats {
	g := &c.sys.gso
	st := GSOStats{
		Active:    g.on.Load(),
		Trains:    g.trains.Load(),
		Segments:  g.segments.Load(),
		Fallbacks: g.fallbacks.Load(),
	}
	if e := syscall.Errno(g.reason.Load()); e != 0 {
		st.Reason = e
	}
	return st
}

// initGSO turns GSO on for fd when want is set and the kernel knows
// UDP_SEGMENT. The probe reads the socket option (the socket-wide segment
// size, 0 by default) and so changes nothing: WriteBatch gives the size
// per train in a control message, which leaves single datagrams
// unsegmented.
func (g *gsoState) init(fd int, want, v6 bool) {
	if !want {
		return
	}
	g.maxBytes = min(maxGSOBytesIPv4, gsoTrainBytes)
	if v6 {
		g.maxBytes = min(maxGSOBytesIPv6, gsoTrainBytes)
	}
	if _, err := unix.GetsockoptInt(fd, unix.IPPROTO_UDP, unix.UDP_SEGMENT); err != nil {
		g.fallBack(err)
		return
	}
	g.on.Store(true)
}

// fallBack turns GSO off for good, recording why.
func (g *gsoState) fallBack(err error) {
	g.on.Store(false)
	g.fallbacks.Store(1)
	e := unix.EOPNOTSUPP
	errors.As(err, &e)
	g.reason.Store(uint32(e))
}

// isGSOError reports whether the kernel refused a train for want of GSO
// rather than for a fault of its datagrams or the network: EIO (no
// checksum offload on the device, or an xfrm route), EINVAL (a kernel or
// socket that cannot segment, e.g. SO_NO_CHECK, or a segment larger than
// the route's MTU), EOPNOTSUPP, and EMSGSIZE (newer kernels' answer to a
// segment larger than the MTU). Sent one per slot instead, such datagrams
// go out (fragmented if need be) or fail on their own merits.
func isGSOError(e syscall.Errno) bool {
	return e == unix.EIO || e == unix.EINVAL || e == unix.EOPNOTSUPP || e == unix.EMSGSIZE
}

// writeGSO is WriteBatch with GSO on: it groups b.Msgs[:n] into trains
// (consecutive datagrams to one Addr, all of one length but the last,
// which may be shorter; at most maxGSOSegments and maxBytes), one mmsghdr
// each, and sends them all with sendmmsg. A datagram that does not join
// its neighbours goes as a plain slot. The trains reuse the batch's
// arrays: train k's header is hdrs[k], its iovecs are iovs[i:j] of its
// datagrams i..j-1 (the datagrams' own buffers, nothing is copied), its
// address names[i] and its control message oob[i*oobSize:].
//
// A train is sent or refused whole, so the count returned is of
// datagrams, as WriteBatch promises. If the kernel refuses a train for
// want of GSO, GSO is turned off for the Conn and the datagrams from that
// train on are sent one per slot.
func (c *Conn) writeGSO(b *Batch, s *batchSys, n int) (int, error) {
	g := &c.sys.gso
	k := 0
	for i := 0; i < n; k++ {
		m := &b.Msgs[i]
		size := len(m.Buf)
		j := i + 1
		if size > 0 && size <= g.maxBytes {
			total := size
			for j < n && j-i < maxGSOSegments {
				next := &b.Msgs[j]
				l := len(next.Buf)
				if l == 0 || l > size || next.Addr != m.Addr || total+l > g.maxBytes {
					break
				}
				total += l
				j++
				if l < size {
					break // a shorter datagram ends the train
				}
			}
		}
		for x := i; x < j; x++ {
			buf := b.Msgs[x].Buf
			s.iovs[x] = unix.Iovec{Base: unsafe.SliceData(buf), Len: uint64(len(buf))}
		}
		h := &s.hdrs[k]
		*h = mmsghdr{hdr: unix.Msghdr{
			Name:    (*byte)(unsafe.Pointer(&s.names[i])),
			Namelen: putName(&s.names[i], m.Addr, c.v6),
			Iov:     &s.iovs[i],
		}}
		h.hdr.SetIovlen(j - i)
		if j-i > 1 {
			oob := s.oob[i*oobSize : i*oobSize+segCmsgLen]
			putSegmentSize(oob, size)
			h.hdr.Control = &oob[0]
			h.hdr.SetControllen(segCmsgLen)
		}
		i = j
	}
	msgs := 0 // datagrams in the headers sent so far
	for done := 0; done < k; {
		h := &s.hdrs[done]
		var err error
		c.sys.wN, c.sys.wErr = 0, 0
		end := k
		if g.fault != 0 { // tests: the kernel refuses every train
			end = done + 1
		}
		if g.fault != 0 && h.hdr.Iovlen > 1 {
			c.sys.wErr = g.fault
		} else {
			c.sys.wHdrs = s.hdrs[done:end]
			err = c.sys.rc.Write(c.sys.writeFn)
		}
		if err != nil {
			return msgs, &net.OpError{Op: "sendmmsg", Net: "udp", Err: err}
		}
		if e := c.sys.wErr; e != 0 {
			if h.hdr.Iovlen > 1 && isGSOError(e) {
				g.fallBack(e)
				sent, err := c.writePlain(b, s, msgs, n)
				return msgs + sent, err
			}
			return msgs, &net.OpError{Op: "sendmmsg", Net: "udp", Err: e}
		}
		var trains, segs uint64
		for _, h := range s.hdrs[done : done+c.sys.wN] {
			msgs += int(h.hdr.Iovlen)
			if h.hdr.Iovlen > 1 {
				trains++
				segs += h.hdr.Iovlen
			}
		}
		if trains > 0 {
			g.trains.Add(trains)
			g.segments.Add(segs)
		}
		done += c.sys.wN
	}
	return msgs, nil
}

// putSegmentSize writes the UDP_SEGMENT control message into oob
// (segCmsgLen bytes).
func putSegmentSize(oob []byte, size int) {
	h := (*unix.Cmsghdr)(unsafe.Pointer(&oob[0]))
	h.Level = unix.IPPROTO_UDP
	h.Type = unix.UDP_SEGMENT
	h.SetLen(unix.CmsgLen(2))
	binary.NativeEndian.PutUint16(oob[unix.SizeofCmsghdr:], uint16(size))
}
