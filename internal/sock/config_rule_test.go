package sock_test

import (
	"net/netip"
	"testing"

	"github.com/mdbus/mdbus/internal/cfgtest"
	"github.com/mdbus/mdbus/internal/sock"
	"github.com/stretchr/testify/require"
)

// TestConfigRule: Open refuses a negative value by name before it opens
// a socket; the zero value opens with the kernel's defaults.
func TestConfigRule(t *testing.T) {
	open := func(c sock.Config) error {
		conn, err := sock.Open(c)
		if err == nil {
			conn.Close()
		}
		return err
	}
	base := sock.Config{Local: netip.MustParseAddrPort("127.0.0.1:0")}
	cfgtest.Refuses(t, sock.ErrConfig, open, base, "TTL", "ReadBuffer", "WriteBuffer", "BusyPoll")
	require.NoError(t, open(base), "zero: the kernel's defaults")
}
