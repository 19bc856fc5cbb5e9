package e2e

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mdbus/mdbus/bench"
	"github.com/mdbus/mdbus/internal/netlab"
	"github.com/mdbus/mdbus/internal/race"
	"github.com/mdbus/mdbus/packetconn"
	"github.com/mdbus/mdbus/packetconn/impair"
)

// groupChildEnv makes the test binary a subscriber process of a group run.
const groupChildEnv = "MDBUS_E2E_GROUP_CHILD"

func groupChild() {
	if err := bench.GroupChildMain(context.Background(), os.Args[1:], os.Stdout); err != nil {
		os.Stderr.WriteString(err.Error() + "\n")
		os.Exit(1)
	}
	os.Exit(0)
}

func groupSpawn(args []string) *exec.Cmd {
	exe, _ := os.Executable()
	cmd := exec.Command(exe, args...)
	cmd.Env = append(os.Environ(), groupChildEnv+"=1")
	return cmd
}

// runGroup publishes n messages at rate to subs subscriber processes
// (shipped defaults) through a loss every one of them shares.
func runGroup(t *testing.T, port uint16, subs, n int, rate, loss float64) bench.GroupResult {
	t.Helper()
	var sendSide *impair.Conn
	res, err := bench.RunGroup(context.Background(), bench.GroupConfig{
		Subs: subs, Count: n, Rate: rate, Size: 64,
		Group: netip.AddrPortFrom(netip.MustParseAddr("239.192.40.1"), port),
		Wrap: func(c packetconn.PacketConn) packetconn.PacketConn {
			return impair.Sender(impair.Config{Loss: loss, Seed: uint64(port), OnlyData: true,
				OnWrap: func(c *impair.Conn) { sendSide = c }})(c)
		},
		Dropped: func() uint64 { return sendSide.Stats().Dropped },
		Spawn:   groupSpawn,
		Timeout: 60 * time.Second,
	})
	require.NoError(t, err)
	t.Logf("%v", res)
	for i, c := range res.Children {
		if i < 3 || c.Lost > 0 || c.Bad > 0 {
			t.Logf("  sub%d: %+v", i+1, c)
		}
	}
	require.Equal(t, subs, res.Complete, "every subscriber delivered every message once, in order, byte-identical")
	require.Zero(t, res.Lost)
	require.Positive(t, res.LostPackets)
	return res
}

// TestAcceptanceGroupSuppression (issue 16, acceptance 1): a loss shared
// by N subscriber processes, with the shipped defaults: about one
// re-request and one repair per lost packet at any N, nothing lost.
func TestAcceptanceGroupSuppression(t *testing.T) {
	netlab.Require(t)
	n := scale(200_000, 20_000)
	groups := []int{1, 4, 16, 32}
	if race.Enabled || testing.Short() {
		groups = []int{1, 4} // 32 race-enabled processes would only measure the detector's overhead
	}
	port := uint16(32100)
	for _, subs := range groups {
		t.Run(fmt.Sprintf("loss-1pct-%d-subs", subs), func(t *testing.T) {
			res := runGroup(t, port, subs, n, 20_000, 0.01)
			port += 2
			require.LessOrEqual(t, res.RequestsPerLoss, 1.5)
			require.LessOrEqual(t, res.RepairsPerLoss, 1.2)
		})
	}
	if race.Enabled || testing.Short() {
		return
	}
	t.Run("loss-5pct-16-subs", func(t *testing.T) {
		res := runGroup(t, port, 16, n, 20_000, 0.05)
		require.LessOrEqual(t, res.RequestsPerLoss, 2.0)
		require.LessOrEqual(t, res.RepairsPerLoss, 1.5)
	})
}
