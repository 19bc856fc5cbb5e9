package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mdbus/mdbus/fanout"
	"github.com/mdbus/mdbus/subscriber"
	"github.com/mdbus/mdbus/wire"
	"github.com/stretchr/testify/require"
)

func TestFanoutUsage(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"fanout", "--capacity", "3"}, "--capacity 3: want a power of two"},
		{[]string{"fanout", "--name", "a/b"}, "a name, not a path"},
		{[]string{"sub", "--fanout", "x", "--start", "session"}, "want live or seq:N"},
		{[]string{"sub", "--fanout", "x", "--stop-on-loss"}, "not supported with --fanout"},
	} {
		var out, errb bytes.Buffer
		require.Equal(t, 2, run(append([]string{"mdbus", "--counters=false"}, tc.args...), &out, &errb), "%v: %s", tc.args, errb.String())
		require.Contains(t, errb.String(), tc.want)
	}
}

// TestSubFanout: mdbus sub --fanout PATH prints what a ring's writer
// publishes, as mdbus sub prints a feed.
func TestSubFanout(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("host fan-out is Linux only")
	}
	dir, err := os.MkdirTemp("/dev/shm", "mdbus-cmd-test-")
	if err != nil {
		dir = t.TempDir()
	} else {
		t.Cleanup(func() { os.RemoveAll(dir) })
	}
	r, err := fanout.Create(filepath.Join(dir, "feed.ring"), fanout.MinCapacity)
	require.NoError(t, err)
	defer r.Close()
	id := subscriber.StreamID{Session: wire.Session([]byte("CMDTEST   "))}
	var stop atomic.Bool
	done := make(chan struct{})
	go func() { // publish until the command has read its three messages
		defer close(done)
		for s := wire.Seq(1); !stop.Load(); s++ {
			r.Message(subscriber.Message{Stream: id, Seq: s, Data: []byte(fmt.Sprintf("message %d", s))}, r.Now())
			// Real time on purpose: the command's reader joins at the ring's end at a moment
			// nothing outside it shows; at 10,000 messages/s the 1 MiB ring takes ~2 s to lap it.
			time.Sleep(100 * time.Microsecond)
		}
	}()
	var out, errb bytes.Buffer
	code := run([]string{"mdbus", "--counters=false", "sub", "--fanout", r.Path(), "--count", "3"}, &out, &errb)
	stop.Store(true)
	<-done
	require.Equal(t, 0, code, errb.String())
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	require.Len(t, lines, 3, out.String())
	var first int
	_, err = fmt.Sscanf(lines[0], "CMDTEST %d message", &first)
	require.NoError(t, err, lines[0])
	for i, l := range lines {
		require.Equal(t, fmt.Sprintf("CMDTEST %d message %d", first+i, first+i), l)
	}
}
