package e2e

import (
	"testing"

	"github.com/mdbus/mdbus/internal/verify"
	"github.com/mdbus/mdbus/subscriber"
	"github.com/mdbus/mdbus/wire"
)

// scale returns full, or small under -race or -short.
func scale(full, small int) int {
	if raceEnabled || testing.Short() {
		return small
	}
	return full
}

// checker wraps verify.Checker for subscriber deliveries.
type checker struct {
	name string
	*verify.Checker[subscriber.StreamID]
}

func newChecker(name string, want int) *checker {
	return &checker{name, verify.NewChecker[subscriber.StreamID](want)}
}

func (c *checker) onMessage(m subscriber.Message) { c.Deliver(m.Stream, uint64(m.Seq), m.Data) }

// bySession finds the stream of session s.
func (c *checker) bySession(s wire.Session) (subscriber.StreamID, bool) {
	for id := range c.Streams() {
		if id.Session == s {
			return id, true
		}
	}
	return subscriber.StreamID{}, false
}

func (c *checker) verify(t *testing.T, s wire.Session, sum [32]byte, n int, first wire.Seq) {
	t.Helper()
	id, ok := c.bySession(s)
	if !ok {
		t.Fatalf("%s: no stream of session %s", c.name, s)
	}
	if err := c.Check(id, uint64(first), n, sum); err != nil {
		t.Errorf("%s: %v", c.name, err)
	}
}

func (c *checker) sessions() []string {
	var out []string
	for id := range c.Streams() {
		out = append(out, id.Session.String())
	}
	return out
}

func (c *checker) String() string { return c.name }
