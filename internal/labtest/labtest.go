// Package labtest is the TestMain of every package whose tests open
// sockets: it runs the tests inside the private network lab
// (internal/netlab) and then checks that no goroutine leaked (goleak).
// It also holds what those tests share: a refused address and a bounded
// condition wait (Poll).
//
//	func TestMain(m *testing.M) { labtest.Main(m) }
//
// Tests that open a socket still call netlab.Require(t) first.
package labtest

import (
	"fmt"
	"net"
	"net/netip"
	"os"
	"testing"
	"time"

	"github.com/mdbus/mdbus/internal/netlab"
	"go.uber.org/goleak"
)

type leakChecked struct{ m *testing.M }

func (l leakChecked) Run() int {
	code := l.m.Run()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintf(os.Stderr, "goleak: goroutines leaked after the tests: %v\n", err)
			return 1
		}
	}
	return code
}

// Main runs m in the lab with a leak check and exits with its code.
func Main(m *testing.M) { os.Exit(netlab.Main(leakChecked{m})) }

// RefusedAddr returns a loopback UDP address nothing listens on: a port
// bound and released at once, standing for a retransmitter that is down
// (its host answers with ICMP port unreachable).
func RefusedAddr(t testing.TB) netip.AddrPort {
	t.Helper()
	c, err := net.ListenUDP("udp4", net.UDPAddrFromAddrPort(netip.MustParseAddrPort("127.0.0.1:0")))
	if err != nil {
		t.Fatalf("labtest: a port to refuse: %v", err)
	}
	a := c.LocalAddr().(*net.UDPAddr).AddrPort()
	if err := c.Close(); err != nil {
		t.Fatalf("labtest: %v", err)
	}
	return a
}

// Poll calls cond every period until it holds or d passes, and says
// whether it held. It bounds a wait on what a test cannot be told of (a
// counter, a file, another process's output) and returns as soon as cond
// holds, so no test guesses how long the system under test needs.
func Poll(d, every time.Duration, cond func() bool) bool {
	deadline := time.NewTimer(d)
	defer deadline.Stop()
	tick := time.NewTicker(every)
	defer tick.Stop()
	for !cond() {
		select {
		case <-tick.C:
		case <-deadline.C:
			return cond()
		}
	}
	return true
}
