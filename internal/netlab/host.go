package netlab

import (
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"strings"
)

// Bridge is the name of the lab's switch between its hosts, and HostLink
// the name of each host's interface on it.
const (
	Bridge   = "mdbbr0"
	HostLink = "eth0"
)

// Host is one machine of the lab: a network namespace of its own, made
// inside the lab's, linked to the lab's bridge by a veth pair. Its
// interface HostLink has the addresses IPv4 (10.78.0.N/24) and IPv6
// (fd78::N/64), lo is up, and multicast leaves through HostLink. A test
// process uses several hosts at once: a socket belongs to the namespace
// it was created in, so what Do opens is the host's, whichever goroutine
// uses it afterwards.
type Host struct {
	Name       string
	IPv4, IPv6 netip.Addr
	// Port is the bridge's side of the host's link, in the lab namespace.
	Port string
	ns   *os.File
}

func ipAll(steps ...[]string) error {
	for _, s := range steps {
		out, err := exec.Command("ip", s...).CombinedOutput()
		if err != nil {
			return fmt.Errorf("netlab: ip %s: %v: %s", strings.Join(s, " "), err, strings.TrimSpace(string(out)))
		}
	}
	return nil
}
