//go:build linux

package e2e

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestOpsStatInTmux: mdbus stat runs in an 80x24 terminal (a detached
// tmux session), and the screen shows, from its first line, a publisher
// and a subscriber with non-zero rates per second and a stream line with
// its lag and state; Ctrl-C ends it. --once --json parses.
func TestOpsStatInTmux(t *testing.T) {
	tmux, err := exec.LookPath("tmux")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("tmux not found: apt-get install tmux")
		}
		t.Skip("tmux not found: apt-get install tmux")
	}
	tmp, bin, ctr := opsLab(t)
	const group = "239.192.78.1:31781"
	sub := startMdbus(t, bin, ctr, "sub", "sub", "--group", group, "--stats", "1s")
	pub := startMdbus(t, bin, ctr, "pub", "pub", "--group", group, "--synthetic", "--rate", "5000", "--duration", "60s")

	sock := filepath.Join(tmp, "tmux.sock")
	tm := func(args ...string) (string, error) {
		cmd := exec.Command(tmux, append([]string{"-S", sock, "-f", "/dev/null"}, args...)...)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	out, err := tm("new-session", "-d", "-s", "stat", "-x", "80", "-y", "24",
		bin+" stat --interval 500ms --dir "+ctr)
	require.NoError(t, err, out)
	t.Cleanup(func() { tm("kill-server") })

	rate := regexp.MustCompile(`(?m)^  [A-Z0-9]+@[0-9.]+:\d+ +([0-9.]+)(k?) +\d+ +\d+ +\d+ +\d+ +\S+ +\S+ running$`)
	var screen string
	ok := pollEach(30*time.Second, 200*time.Millisecond, func() bool {
		screen, err = tm("capture-pane", "-p", "-t", "stat")
		require.NoError(t, err, screen)
		m := rate.FindStringSubmatch(screen)
		if m == nil || !strings.HasPrefix(screen, "mdbus stat ") || !regexp.MustCompile(`(?m)^pub +\d+ running `).MatchString(screen) ||
			!regexp.MustCompile(`(?m)^sub +\d+ running `).MatchString(screen) {
			return false
		}
		r, _ := strconv.ParseFloat(m[1], 64)
		return r > 0
	})
	require.True(t, ok, "the live view never showed both processes, a stream row and a non-zero message rate:\n%s", screen)
	t.Logf("mdbus stat in tmux:\n%s", screen)

	// --json, once: it parses and lists both processes live.
	js, err := exec.Command(bin, "stat", "--once", "--json", "--dir", ctr).Output()
	require.NoError(t, err)
	var view struct {
		Processes []struct {
			Role, State string
			Values      []struct {
				Name, Owner string
				Value       int64
			}
		}
	}
	require.NoError(t, json.Unmarshal(js, &view), "%s", js)
	roles := map[string]string{}
	for _, p := range view.Processes {
		roles[p.Role] = p.State
		require.NotEmpty(t, p.Values)
	}
	require.Equal(t, map[string]string{"pub": "live", "sub": "live"}, roles)

	// Ctrl-C ends the view and with it the tmux session.
	out, err = tm("send-keys", "-t", "stat", "C-c")
	require.NoError(t, err, out)
	require.True(t, pollEach(10*time.Second, 100*time.Millisecond, func() bool { _, err := tm("has-session", "-t", "stat"); return err != nil }),
		"mdbus stat did not exit on Ctrl-C")
	for _, p := range []*proc{pub, sub} {
		require.NoError(t, p.cmd.Process.Signal(syscall.SIGINT))
		require.Equal(t, 0, p.wait(t, 20*time.Second), p.name)
	}
}

// TestOpsStatUnreadable: a counters file this user may not read (another
// user's, mode 0600) is listed as unreadable with what to do, and left
// alone. The reader runs in a nested user namespace, where root's
// capabilities stop at files it does not own by mapping, so mode 000 is
// enough to deny it as it would deny another user.
func TestOpsStatUnreadable(t *testing.T) {
	unshare, err := exec.LookPath("unshare")
	if err != nil {
		t.Skip("unshare (util-linux) not found")
	}
	_, bin, ctr := opsLab(t)
	sub := startMdbus(t, bin, ctr, "sub", "sub", "--group", "239.192.78.2:31782", "--stats", "1s")
	var path string
	require.True(t, poll(20*time.Second, func() bool {
		m, _ := filepath.Glob(filepath.Join(ctr, "*.ctr"))
		if len(m) == 1 {
			path = m[0]
		}
		return path != ""
	}), "no counters file")
	require.NoError(t, os.Chmod(path, 0))
	out, err := exec.Command(unshare, "-U", bin, "stat", "--once", "--json", "--dir", ctr).Output()
	if err != nil {
		t.Skipf("nested user namespace not available: %v", err)
	}
	var view struct {
		Processes []struct {
			State, Role, Error string
			PID                int
		}
	}
	require.NoError(t, json.Unmarshal(out, &view), "%s", out)
	require.Len(t, view.Processes, 1)
	p := view.Processes[0]
	if p.State == "live" {
		t.Skip("the nested namespace still reads the file (capabilities reach it here)")
	}
	require.Equal(t, "unreadable", p.State)
	require.Equal(t, "sub", p.Role)
	require.Equal(t, sub.cmd.Process.Pid, p.PID)
	require.Contains(t, p.Error, "permission denied")
	require.Contains(t, p.Error, "run mdbus stat as that user or root")
	_, err = os.Stat(path)
	require.NoError(t, err, "an unreadable file is not removed")
	require.NoError(t, sub.cmd.Process.Signal(syscall.SIGTERM))
	require.Equal(t, 0, sub.wait(t, 20*time.Second))
}
