package netlab_test

import (
	"net"
	"os"
	"testing"

	"github.com/mdbus/mdbus/internal/netlab"
	"github.com/stretchr/testify/require"
)

func TestMain(m *testing.M) { os.Exit(netlab.Main(m)) }

func TestLabNetwork(t *testing.T) {
	netlab.Require(t)
	lo, err := net.InterfaceByName("lo")
	require.NoError(t, err)
	require.NotZero(t, lo.Flags&net.FlagUp, "lo is up")
	require.NotZero(t, lo.Flags&net.FlagMulticast, "lo is multicast")
	for _, name := range []string{netlab.VethA, netlab.VethB} {
		ifi, err := net.InterfaceByName(name)
		require.NoError(t, err)
		require.NotZero(t, ifi.Flags&net.FlagUp, name)
	}
	// The lab must not see the host's interfaces: only lo and the pair.
	all, err := net.Interfaces()
	require.NoError(t, err)
	require.Len(t, all, 3)
}

func TestSetupRefusesOutsideLab(t *testing.T) {
	if netlab.Inside() {
		t.Setenv("MDBUS_NETLAB", "")
	}
	require.Error(t, netlab.Setup())
}
