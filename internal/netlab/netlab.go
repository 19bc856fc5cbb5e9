// Package netlab is the private network lab: it runs a process inside a new
// user and network namespace (Linux CLONE_NEWUSER|CLONE_NEWNET, no root
// needed where unprivileged user namespaces are allowed), so that nothing it
// sends can reach a real network. A root caller gets a plain network
// namespace instead (CLONE_NEWNET alone), equally private: it differs from
// the architecture's user+network namespace only in keeping the host's
// capabilities, which lets benchmark sockets use SO_RCVBUFFORCE (see
// Reexec).
//
// Inside the lab:
//
//   - lo is up, flagged multicast, with a route for 224.0.0.0/4, so IPv4
//     multicast works on the loopback interface;
//   - a veth pair, VethA and VethB, is up with duplicate address detection
//     off, IPv4 addresses 10.77.0.1/24 and 10.77.0.2/24 and IPv6 addresses
//     fd77::1/64 and fd77::2/64, because IPv6 multicast does not work over
//     lo on Linux and veth does.
//
// Several machines: NewHost makes a "host" inside the lab, a network
// namespace of its own linked by a veth pair to the lab's bridge (Bridge,
// multicast snooping off, so groups flood to every host), with addresses
// 10.78.0.N/24 and fd78::N/64 on its link HostLink. Host.Do runs a
// function in the host's namespace, so one test process opens sockets on
// several hosts; Host.SetLink takes its link down and up. Everything stays
// inside the lab's namespace.
//
// Tests use it from TestMain:
//
//	func TestMain(m *testing.M) { os.Exit(netlab.Main(m)) }
//
// and every test that opens a socket calls netlab.Require(t) first. Main
// re-executes the test binary inside the lab and returns its exit code.
// When no namespace can be made (always, off Linux), tests run outside it
// and Require skips them with the reason, or fails them when CI=true, so a
// failing lab can never pass silently in CI and a test can never send on
// the caller's network.
//
// The mdbus command uses Reexec for its --netns flag. This package imports
// neither testing nor anything of the bus.
package netlab

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"
)

// Names of the lab's veth interfaces and their addresses.
const (
	VethA    = "mdbA"
	VethB    = "mdbB"
	IPv4A    = "10.77.0.1"
	IPv4B    = "10.77.0.2"
	IPv6A    = "fd77::1"
	IPv6B    = "fd77::2"
	envIn    = "MDBUS_NETLAB"         // "1" inside the lab
	envFail  = "MDBUS_NETLAB_FAILURE" // why the lab could not be made
	envReady = "MDBUS_NETLAB_READY"   // "1" once the namespace's network is set up
)

// Inside reports whether this process runs inside the lab.
func Inside() bool { return os.Getenv(envIn) == "1" }

// Failure is why the lab could not be entered, or "" when it was (or was
// not tried).
func Failure() string { return os.Getenv(envFail) }

// Runner is what Main runs: *testing.M satisfies it.
type Runner interface{ Run() int }

// Main runs m inside the lab and returns the exit code for os.Exit. In the
// parent process it re-executes the binary in a new namespace and returns
// the child's code; inside, it sets up the network and runs m. When the
// namespace cannot be made it runs m here, with Require skipping (or, under
// CI=true, failing) every test that needs the lab.
func Main(m Runner) int {
	if Inside() {
		if err := Setup(); err != nil {
			fmt.Fprintf(os.Stderr, "netlab: set up the lab network: %v\n", err)
			return 2
		}
		return m.Run()
	}
	if Failure() == "" {
		code, err := Reexec(os.Args, nil)
		if err == nil {
			return code
		}
		os.Setenv(envFail, err.Error())
	}
	return m.Run()
}

// T is the part of testing.TB that Require uses.
type T interface {
	Helper()
	Skipf(format string, args ...any)
	Fatalf(format string, args ...any)
}

// Require stops t unless it runs inside the lab: it skips, or fails when
// the environment has CI=true.
func Require(t T) {
	t.Helper()
	if Inside() {
		return
	}
	why := Failure()
	if why == "" {
		why = "this process is not inside the lab (call netlab.Main from TestMain)"
	}
	if os.Getenv("CI") == "true" {
		t.Fatalf("netlab: no private network namespace, and CI=true forbids skipping: %s", why)
	}
	t.Skipf("netlab: skipped, no private network namespace: %s", why)
}

// Reexec runs args (args[0] is ignored: the running executable is used)
// inside a new network namespace (and user namespace, unless the caller is
// root: see start), with this process's standard
// streams and environment plus env, and returns the child's exit code.
// The error is non-nil only when the child could not be started.
func Reexec(args []string, env []string) (int, error) {
	exe, err := os.Executable()
	if err != nil {
		return 0, fmt.Errorf("netlab: find own executable: %w", err)
	}
	cmd, err := start(exe, args[1:], env, os.Geteuid() == 0)
	if err != nil {
		return 0, err
	}
	relay := relaySignals(cmd.Process)
	defer relay()
	err = cmd.Wait()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return 128 + int(ws.Signal()), nil
		}
		return ee.ExitCode(), nil
	}
	if err != nil {
		return 0, fmt.Errorf("netlab: wait for lab process: %w", err)
	}
	return 0, nil
}

// Setup configures the network of the namespace this process is in. It
// refuses to run outside the lab, so it can never change the host. It does
// nothing when the namespace is already set up (a child process of the lab,
// such as a fuzzing worker, inherits the namespace and its network).
func Setup() error {
	if !Inside() {
		return errors.New("netlab: refusing to configure a network outside the lab")
	}
	if os.Getenv(envReady) == "1" {
		return nil
	}
	if _, err := exec.LookPath("ip"); err != nil {
		return errors.New("netlab: the ip command (iproute2) is missing: apt-get install iproute2")
	}
	// New interfaces inherit "default": turn DAD off so IPv6 addresses are
	// usable at once instead of after a second of tentative state.
	for _, f := range []string{"all", "default"} {
		_ = os.WriteFile("/proc/sys/net/ipv6/conf/"+f+"/accept_dad", []byte("0"), 0)
	}
	steps := [][]string{
		{"link", "set", "lo", "up"},
		{"link", "set", "lo", "multicast", "on"},
		{"route", "add", "224.0.0.0/4", "dev", "lo", "src", "127.0.0.1"},
		{"link", "add", VethA, "type", "veth", "peer", "name", VethB},
		{"addr", "add", IPv4A + "/24", "dev", VethA},
		{"addr", "add", IPv4B + "/24", "dev", VethB},
		{"-6", "addr", "add", IPv6A + "/64", "dev", VethA, "nodad"},
		{"-6", "addr", "add", IPv6B + "/64", "dev", VethB, "nodad"},
		{"link", "set", VethA, "up"},
		{"link", "set", VethB, "up"},
	}
	for _, s := range steps {
		out, err := exec.Command("ip", s...).CombinedOutput()
		if err != nil {
			return fmt.Errorf("netlab: ip %s: %v: %s", strings.Join(s, " "), err, strings.TrimSpace(string(out)))
		}
	}
	// A veth's carrier, and with it IPv6 multicast routing, comes a moment
	// after the link is set up: until then a send to a group on it is
	// "network unreachable".
	for _, dev := range []string{VethA, VethB} {
		if err := waitMulticastRoute6(dev); err != nil {
			return err
		}
	}
	return os.Setenv(envReady, "1")
}

// waitMulticastRoute6 waits up to 5 s until dev is operationally up (a
// veth's carrier comes a moment after "ip link set up") and IPv6 routes a
// group out of it.
func waitMulticastRoute6(dev string) error {
	for range 500 {
		link, _ := exec.Command("ip", "-o", "link", "show", "dev", dev).Output() // sysfs shows the host's namespace, not the lab's
		if strings.Contains(string(link), "state UP") &&
			exec.Command("ip", "-6", "route", "get", "ff15::1", "oif", dev).Run() == nil {
			return nil
		}
		time.Sleep(10 * time.Millisecond)
	}
	return fmt.Errorf("netlab: %s does not route IPv6 multicast after 5 s", dev)
}
