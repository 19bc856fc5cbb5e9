package journal

import (
	"bufio"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mdbus/mdbus/internal/race"
	"github.com/mdbus/mdbus/wire"
)

const (
	crashEnvDir   = "MDBUS_JOURNAL_CRASH_DIR"
	crashEnvTotal = "MDBUS_JOURNAL_CRASH_TOTAL"
	crashSeed     = 20261130
)

// TestCrashChild is the child of TestCrashSafety: it resumes (or creates)
// the stream and appends the generator's messages up to the total, printing
// its durable boundary whenever it moves. It does nothing in a normal run.
func TestCrashChild(t *testing.T) {
	dir := os.Getenv(crashEnvDir)
	if dir == "" {
		t.Skip("the child of TestCrashSafety")
	}
	total, err := strconv.ParseUint(os.Getenv(crashEnvTotal), 10, 64)
	require.NoError(t, err)
	j, err := Open(dir, Config{SyncInterval: 10 * time.Millisecond, SegmentBytes: 4 << 20})
	require.NoError(t, err)
	var w *Writer
	if id, ok := j.Latest(testSession, netip.AddrPort{}); ok {
		w, err = j.Resume(id)
	} else {
		w, err = j.Create(testSession, testSource, 1)
	}
	require.NoError(t, err)
	out := bufio.NewWriter(os.Stdout)
	fmt.Fprintf(out, "start %d\n", w.Next())
	out.Flush()
	reported := w.Durable()
	var buf []byte
	for seq := w.Next(); seq <= wire.Seq(total); seq++ {
		buf = msgFor(buf, crashSeed, seq)
		require.NoError(t, w.Append(seq, tsFor(seq), buf))
		if d := w.Durable(); d != reported {
			reported = d
			fmt.Fprintf(out, "durable %d\n", d)
			out.Flush()
		}
	}
	require.NoError(t, w.Close())
	require.NoError(t, j.Close())
	fmt.Fprintf(out, "done %d\n", total+1)
	out.Flush()
}

// TestCrashSafety is acceptance 1 at the journal level: a child appending
// 1,000,000 messages with a 10 ms sync interval is killed (SIGKILL) at a
// seeded random moment, 20 times. After each kill the parent may also cut
// the newest segment anywhere after the last durable boundary the child
// reported (what a machine crash loses) and zero-fill the rest; reopening
// must keep every record below that boundary intact and byte-identical,
// cut the torn tail, and let the next child resume at Next.
func TestCrashSafety(t *testing.T) {
	if os.Getenv(crashEnvDir) != "" {
		t.Skip("in the child")
	}
	total, kills := 1_000_000, 20
	if testing.Short() || race.Enabled {
		total, kills = 100_000, 5
	}
	dir := t.TempDir()
	rng := rand.New(rand.NewPCG(crashSeed, 1))
	var durable wire.Seq // highest boundary any child reported
	torn := 0
	run := func(kill bool) wire.Seq {
		cmd := exec.Command(os.Args[0], "-test.run=^TestCrashChild$", "-test.count=1")
		cmd.Env = append(os.Environ(), crashEnvDir+"="+dir, crashEnvTotal+"="+strconv.Itoa(total))
		stdout, err := cmd.StdoutPipe()
		require.NoError(t, err)
		cmd.Stderr = os.Stderr
		require.NoError(t, cmd.Start())
		var last atomic.Uint64
		started := make(chan struct{})
		lines := make(chan struct{})
		go func() {
			defer close(lines)
			sc := bufio.NewScanner(stdout)
			once := false
			for sc.Scan() {
				f := strings.Fields(sc.Text())
				if len(f) == 2 && (f[0] == "durable" || f[0] == "done") {
					n, _ := strconv.ParseUint(f[1], 10, 64)
					last.Store(n)
				}
				if len(f) == 2 && f[0] == "start" && !once {
					once = true
					close(started)
				}
			}
			if !once {
				close(started)
			}
		}()
		if kill {
			select {
			case <-started:
			case <-time.After(30 * time.Second):
				t.Fatal("child did not start")
			}
			// Real time on purpose: the subject is a SIGKILL at an
			// arbitrary instant of the child's writes and the kernel's.
			time.Sleep(time.Duration(rng.IntN(150_000)) * time.Microsecond)
			_ = cmd.Process.Kill()
		}
		<-lines
		err = cmd.Wait()
		if !kill {
			require.NoError(t, err)
		}
		return wire.Seq(last.Load())
	}
	t0 := time.Now()
	for i := range kills {
		d := run(true)
		t.Logf("kill %d: child ran until %v", i, time.Since(t0))
		if d > durable {
			durable = d
		}
		// A machine crash may lose what was not synced: sometimes cut
		// the newest segment after the durable boundary and zero-fill.
		if rng.IntN(2) == 0 {
			if simulateLostTail(t, dir, durable, rng) {
				torn++
			}
		}
		j, err := Open(dir, Config{})
		require.NoError(t, err, "reopen after kill %d", i)
		id, ok := j.Latest(testSession, netip.AddrPort{})
		require.True(t, ok)
		first, next := j.find(id).bounds()
		require.Equal(t, wire.Seq(1), first)
		require.GreaterOrEqual(t, next, durable, "kill %d: records below the durable boundary %d lost", i, durable)
		checkStream(t, j, id, crashSeed, 1, next)
		t.Logf("kill %d: durable %d, next %d, torn tails cut %d", i, durable, next, len(j.TornTails()))
		require.NoError(t, j.Close())
	}
	t.Logf("before the last child %v", time.Since(t0))
	done := run(false)
	t.Logf("after the last child %v", time.Since(t0))
	require.Equal(t, wire.Seq(total+1), done)
	j, err := Open(dir, Config{ReadOnly: true})
	require.NoError(t, err)
	defer j.Close()
	id, _ := j.Latest(testSession, netip.AddrPort{})
	checkStream(t, j, id, crashSeed, 1, wire.Seq(total+1))
	t.Logf("%d messages, %d kills, %d simulated lost tails", total, kills, torn)
}

// simulateLostTail cuts the newest segment of the journal in dir at a
// random offset after the record of sequence durable (if the segment holds
// more), then appends zeros, as a machine crash can leave it.
func simulateLostTail(t *testing.T, dir string, durable wire.Seq, rng *rand.Rand) bool {
	j, err := Open(dir, Config{ReadOnly: true})
	require.NoError(t, err)
	id, _ := j.Latest(testSession, netip.AddrPort{})
	st := j.find(id)
	seg := st.segs[len(st.segs)-1]
	require.NoError(t, j.Close())
	b, err := os.ReadFile(seg.path)
	require.NoError(t, err)
	// Offset after the record durable-1 (or the header).
	keep := int64(SegmentHeaderLen)
	for off := int64(SegmentHeaderLen); off < int64(len(b)); {
		fr, s := decodeFrame(b[off:])
		if s != frameOK || fr.seq >= durable {
			break
		}
		off += int64(fr.n)
		keep = off
	}
	if keep >= int64(len(b)) {
		return false
	}
	cut := keep + rng.Int64N(int64(len(b))-keep)
	b = append(b[:cut], make([]byte, rng.IntN(3)*4096)...)
	require.NoError(t, os.WriteFile(seg.path, b, 0o644))
	return true
}
