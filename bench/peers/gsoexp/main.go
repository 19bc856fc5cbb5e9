//go:build linux

// Command gsoexp measures what UDP GSO (UDP_SEGMENT) and GRO (UDP_GRO) give
// IPv4 multicast on lo: one sender, as fast as it goes for -d, and -subs
// receiving sockets (each on its own thread), with sendmmsg of -segs
// datagrams per call (-mode mmsg) or one sendmsg carrying -segs segments
// (-mode gso), and receivers with or without UDP_GRO (-gro). It prints
// datagrams sent and received per second and the process's CPU per
// datagram. With -conn the receivers are the bus's own sockets
// (internal/sock Conn.ReadBatch, batches of 64, UDP_GRO through
// sock.Config.GRO, trains split into one message per datagram), so the
// figures include that split and copy. With -sub the datagrams are
// MoldUDP64 packets of -msg-byte messages (as many as fit in -seg bytes)
// and the receivers are subscribers (the subscriber package, one
// goroutine each, GRO unless -gro=false), so the figures are messages
// delivered per second per subscriber. It refuses to run outside the
// benchmark lab:
//
//	go build -o /tmp/gsoexp ./bench/peers/gsoexp
//	mdbus bench lab -- /tmp/gsoexp -mode gso -gro -subs 4
//
// The results are in BENCHMARKS.md ("UDP GSO and GRO").
package main

import (
	"encoding/binary"
	"flag"
	"fmt"
	"net"
	"net/netip"
	"os"
	"runtime"
	"runtime/pprof"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"github.com/mdbus/mdbus/internal/netlab"
	"github.com/mdbus/mdbus/internal/sock"
	"github.com/mdbus/mdbus/subscriber"
	"github.com/mdbus/mdbus/wire"
	"golang.org/x/sys/unix"
)

var group = [4]byte{239, 255, 9, 9}

// mmsghdr is struct mmsghdr of Linux amd64/arm64.
type mmsghdr struct {
	hdr unix.Msghdr
	n   uint32
	_   [4]byte
}

func main() {
	mode := flag.String("mode", "mmsg", "mmsg: sendmmsg of -segs datagrams; gso: one sendmsg of -segs segments (UDP_SEGMENT)")
	gro := flag.Bool("gro", false, "receivers enable UDP_GRO")
	subs := flag.Int("subs", 1, "receiving sockets (1-16)")
	seg := flag.Int("seg", 1472, "datagram (segment) size in bytes (16-8972)")
	segs := flag.Int("segs", 40, "datagrams per send call (1-64)")
	dur := flag.Duration("d", 3*time.Second, "how long to send (at most 1m)")
	port := flag.Int("port", 45000, "UDP port")
	subMode := flag.Bool("sub", false, "send MoldUDP64 packets of -msg-byte messages to subscribers (subscriber package; GRO per -gro)")
	msgSize := flag.Int("msg", 64, "with -sub: message size in bytes")
	prof := flag.String("cpuprofile", "", "write a CPU profile of the run to this file")
	useConn := flag.Bool("conn", false, "receive with internal/sock's Conn.ReadBatch (batches of 64) instead of recvmsg")
	flag.Parse()
	switch {
	case !netlab.Inside():
		fail("refusing to send multicast outside the lab: run it as mdbus bench lab -- gsoexp ...")
	case *mode != "mmsg" && *mode != "gso":
		fail("-mode %q: want mmsg or gso", *mode)
	case *subs < 1 || *subs > 16, *seg < 16 || *seg > 8972, *segs < 1 || *segs > 64, *dur <= 0 || *dur > time.Minute:
		fail("flag out of range (-subs 1-16, -seg 16-8972, -segs 1-64, -d up to 1m)")
	}
	if *subMode {
		if *msgSize < 1 || *msgSize > *seg-wire.HeaderLen-wire.MsgLenLen {
			fail("-msg %d does not fit a %d-byte packet", *msgSize, *seg)
		}
		*seg = wire.PacketLen((*seg-wire.HeaderLen)/(wire.MsgLenLen+*msgSize), ((*seg-wire.HeaderLen)/(wire.MsgLenLen+*msgSize))**msgSize)
	}
	var got, reads atomic.Uint64
	var stop atomic.Bool
	var wg sync.WaitGroup
	var conns []*sock.Conn
	var msubs []*mdSub
	for range *subs {
		if *subMode {
			msubs = append(msubs, newMdSub(*port, *gro))
			continue
		}
		if *useConn {
			c := connReceiver(*port, *gro)
			conns = append(conns, c)
			wg.Add(1)
			go func() {
				defer wg.Done()
				runtime.LockOSThread()
				b := sock.NewBatch(64, 2048)
				for {
					n, err := c.ReadBatch(b)
					if err != nil {
						return // closed after the drain
					}
					reads.Add(1)
					got.Add(uint64(n))
				}
			}()
			continue
		}
		fd := receiver(*port, *gro)
		wg.Add(1)
		go func() {
			defer wg.Done()
			runtime.LockOSThread()
			buf, oob := make([]byte, 65536), make([]byte, 64)
			for !stop.Load() { // SO_RCVTIMEO wakes it to look
				n, oobn, _, _, err := unix.Recvmsg(fd, buf, oob, 0)
				if err != nil {
					continue
				}
				reads.Add(1)
				got.Add(uint64(segments(n, oob[:oobn])))
			}
			unix.Close(fd)
		}()
	}
	time.Sleep(50 * time.Millisecond) // joins settle
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM, 0)
	check(err)
	check(unix.SetsockoptInt(fd, unix.IPPROTO_IP, unix.IP_MULTICAST_TTL, 0))
	check(unix.SetsockoptInt(fd, unix.IPPROTO_IP, unix.IP_MULTICAST_LOOP, 1))
	check(unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_SNDBUF, 4<<20))
	check(unix.SetsockoptIPMreqn(fd, unix.IPPROTO_IP, unix.IP_MULTICAST_IF, &unix.IPMreqn{Ifindex: 1}))
	dst := &unix.SockaddrInet4{Port: *port, Addr: group}
	payload := make([]byte, *seg**segs)
	perPkt := 0
	if *subMode {
		perPkt = (*seg - wire.HeaderLen) / (wire.MsgLenLen + *msgSize)
		sess, _ := wire.ParseSession("GSOEXP")
		msg := make([]byte, *msgSize)
		for i := range *segs {
			var e wire.Encoder
			e.Reset(payload[i**seg:i**seg], sess, 1, *seg)
			for range perPkt {
				check(e.Add(msg))
			}
		}
	}
	nextSeq := uint64(1)
	sa := unix.RawSockaddrInet4{Family: unix.AF_INET, Addr: group}
	binary.BigEndian.PutUint16((*[2]byte)(unsafe.Pointer(&sa.Port))[:], uint16(*port))
	hdrs, iovs := make([]mmsghdr, *segs), make([]unix.Iovec, *segs)
	for i := range hdrs {
		iovs[i] = unix.Iovec{Base: &payload[i**seg], Len: uint64(*seg)}
		hdrs[i].hdr = unix.Msghdr{Name: (*byte)(unsafe.Pointer(&sa)), Namelen: unix.SizeofSockaddrInet4, Iov: &iovs[i], Iovlen: 1}
	}
	oob := make([]byte, unix.CmsgSpace(2))
	h := (*unix.Cmsghdr)(unsafe.Pointer(&oob[0]))
	h.Level, h.Type = unix.IPPROTO_UDP, unix.UDP_SEGMENT
	h.SetLen(unix.CmsgLen(2))
	binary.NativeEndian.PutUint16(oob[unix.CmsgLen(0):], uint16(*seg))
	if *prof != "" {
		f, err := os.Create(*prof)
		check(err)
		check(pprof.StartCPUProfile(f))
		defer f.Close()
		defer pprof.StopCPUProfile()
	}
	cpu0, t0 := cpu(), time.Now()
	var sent uint64
	for time.Since(t0) < *dur {
		if *subMode {
			for i := range *segs {
				binary.BigEndian.PutUint64(payload[i**seg+wire.SeqOffset:], nextSeq)
				nextSeq += uint64(perPkt)
			}
		}
		if *mode == "gso" {
			_, err := unix.SendmsgN(fd, payload, oob, dst, 0)
			check(err)
			sent += uint64(*segs)
			continue
		}
		n, _, e := unix.Syscall6(unix.SYS_SENDMMSG, uintptr(fd), uintptr(unsafe.Pointer(&hdrs[0])), uintptr(len(hdrs)), 0, 0, 0)
		if e != 0 {
			fail("sendmmsg: %v", e)
		}
		sent += uint64(n)
	}
	el := time.Since(t0).Seconds()
	time.Sleep(200 * time.Millisecond) // receivers drain
	if *subMode {
		c := cpu() - cpu0
		sentMsgs := float64(sent) * float64(perPkt)
		lo, hi, lost := uint64(1<<63), uint64(0), uint64(0)
		for _, s := range msubs {
			d := s.delivered.Load()
			lo, hi, lost = min(lo, d), max(hi, d), lost+s.lost.Load()
			_ = s.sub.Close()
		}
		fmt.Printf("sub mode=%s gro=%v subs=%d msg=%d B, %d per %d-byte packet, %d packets per call: sent %.0f msgs/s (%.0f packets/s); delivered per subscriber %.0f-%.0f msgs/s (slowest %.1f%% of sent), %d lost in all; process CPU %.2f s over %.2f s\n",
			*mode, *gro, *subs, *msgSize, perPkt, *seg, *segs, sentMsgs/el, float64(sent)/el, float64(lo)/el, float64(hi)/el, 100*float64(lo)/max(sentMsgs, 1), lost, c, el)
		return
	}
	stop.Store(true)
	for _, c := range conns {
		c.Close()
	}
	wg.Wait()
	c, r := cpu()-cpu0, got.Load()
	fmt.Printf("conn=%v mode=%s gro=%v subs=%d seg=%d segs/call=%d: sent %.0f datagrams/s (%.0f MB/s); received %.0f datagrams/s per socket (%.1f%% of sent), %.1f datagrams per recvmsg; process CPU %.2f s over %.2f s = %.0f ns per datagram sent\n",
		*useConn, *mode, *gro, *subs, *seg, *segs, float64(sent)/el, float64(sent)*float64(*seg)/el/1e6, float64(r)/el/float64(*subs),
		100*float64(r)/float64(*subs)/float64(sent), float64(r)/float64(max(reads.Load(), 1)), c, el, c/float64(sent)*1e9)
}

// receiver opens a socket joined to the group on lo.
func receiver(port int, gro bool) int {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM, 0)
	check(err)
	check(unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_REUSEPORT, 1))
	if unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, 64<<20) != nil {
		check(unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUF, 64<<20))
	}
	if gro {
		check(unix.SetsockoptInt(fd, unix.IPPROTO_UDP, unix.UDP_GRO, 1))
	}
	check(unix.Bind(fd, &unix.SockaddrInet4{Port: port}))
	check(unix.SetsockoptIPMreqn(fd, unix.IPPROTO_IP, unix.IP_ADD_MEMBERSHIP, &unix.IPMreqn{Multiaddr: group, Ifindex: 1}))
	check(unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &unix.Timeval{Usec: 100_000}))
	return fd
}

// mdSub is a subscriber counting what it delivers and loses.
type mdSub struct {
	sub       *subscriber.Subscriber
	delivered atomic.Uint64
	lost      atomic.Uint64
}

func newMdSub(port int, gro bool) *mdSub {
	s := new(mdSub)
	var err error
	s.sub, err = subscriber.New(subscriber.Config{
		Group: netip.AddrPortFrom(netip.AddrFrom4(group), uint16(port)), Interface: "lo",
		StartSeq: 1, Receive: subscriber.Receive{ReadBuffer: 64 << 20, DisableGRO: !gro},
		OnMessage: func(subscriber.Message) { s.delivered.Add(1) },
		OnLoss:    func(l subscriber.Loss) { s.lost.Add(uint64(l.To - l.From)) },
	})
	check(err)
	return s
}

// connReceiver opens the bus's own receiving socket, joined to the group
// on lo.
func connReceiver(port int, gro bool) *sock.Conn {
	c, err := sock.Open(sock.Config{Local: netip.AddrPortFrom(netip.IPv4Unspecified(), uint16(port)), ReusePort: true, ReadBuffer: 64 << 20, GRO: gro})
	check(err)
	lo, err := net.InterfaceByName("lo")
	check(err)
	check(c.Join(lo, netip.AddrFrom4(group), netip.Addr{}))
	if gro && !c.GRO() {
		fail("the kernel refused UDP_GRO")
	}
	return c
}

// segments is how many datagrams a read of n bytes holds: with a UDP_GRO
// control message, n split at its segment size; else one.
func segments(n int, oob []byte) int {
	cms, _ := unix.ParseSocketControlMessage(oob)
	for _, c := range cms {
		if c.Header.Level == unix.IPPROTO_UDP && c.Header.Type == unix.UDP_GRO && len(c.Data) >= 2 {
			if s := int(binary.NativeEndian.Uint16(c.Data)); s > 0 {
				return (n + s - 1) / s
			}
		}
	}
	return 1
}

func cpu() float64 {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9
}

func check(err error) {
	if err != nil {
		fail("%v", err)
	}
}

func fail(format string, a ...any) {
	fmt.Fprintf(os.Stderr, "gsoexp: "+format+"\n", a...)
	os.Exit(1)
}
