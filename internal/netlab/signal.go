package netlab

import (
	"os"
	"os/signal"
	"syscall"
)

// relaySignals forwards SIGINT and SIGTERM to the lab process so that it
// can end cleanly, and returns a function that stops forwarding.
func relaySignals(p *os.Process) func() {
	ch := make(chan os.Signal, 2)
	signal.Notify(ch, syscall.SIGINT, syscall.SIGTERM)
	done := make(chan struct{})
	go func() {
		for {
			select {
			case s := <-ch:
				_ = p.Signal(s)
			case <-done:
				return
			}
		}
	}()
	return func() { signal.Stop(ch); close(done) }
}
