//go:build !linux

package sock_test

import (
	"errors"
	"net/netip"
	"runtime"
	"testing"

	"github.com/mdbus/mdbus/internal/sock"
	"github.com/stretchr/testify/require"
)

// TestOpenUnsupported: off Linux, Open says at run time that mdbus sockets
// are not supported here, naming the OS.
func TestOpenUnsupported(t *testing.T) {
	c, err := sock.Open(sock.Config{Local: netip.MustParseAddrPort("127.0.0.1:0")})
	require.Nil(t, c)
	require.ErrorIs(t, err, errors.ErrUnsupported)
	require.ErrorIs(t, err, sock.ErrUnsupported)
	require.ErrorContains(t, err, runtime.GOOS)
}
