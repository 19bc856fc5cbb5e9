//go:build linux

package netlab

import (
	"bytes"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestCommandNamespaces runs a shell in both kinds of lab namespace and
// checks that it lands in a network namespace of its own, with the user
// mapping each kind promises.
func TestCommandNamespaces(t *testing.T) {
	self, err := os.Readlink("/proc/self/ns/net")
	require.NoError(t, err)
	for _, tc := range []struct {
		name  string
		plain bool
	}{{"user+net", false}, {"net-only", true}} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.plain && os.Geteuid() != 0 {
				t.Skip("a plain network namespace needs root")
			}
			cmd := command("/bin/sh", []string{"-c", "readlink /proc/self/ns/net; cat /proc/self/uid_map"}, nil, tc.plain)
			var out bytes.Buffer
			cmd.Stdout = &out
			if err := cmd.Run(); err != nil {
				t.Skipf("namespaces unavailable here: %v", err)
			}
			lines := strings.Split(strings.TrimSpace(out.String()), "\n")
			require.Len(t, lines, 2, out.String())
			require.NotEqual(t, self, lines[0], "the child has a network namespace of its own")
			uidMap := strings.Fields(lines[1])
			require.Len(t, uidMap, 3)
			if tc.plain {
				mine, err := os.ReadFile("/proc/self/uid_map")
				require.NoError(t, err)
				require.Equal(t, strings.Fields(string(mine)), uidMap, "a plain network namespace keeps the caller's user namespace")
			} else {
				require.Equal(t, []string{"0", "1"}, []string{uidMap[0], uidMap[2]}, "the caller is root inside, and only the caller is mapped")
			}
		})
	}
}
