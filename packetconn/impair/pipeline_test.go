package impair

import (
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/mdbus/mdbus/internal/labtest"
	"github.com/mdbus/mdbus/internal/sock"
	"github.com/mdbus/mdbus/wire"
	"github.com/stretchr/testify/require"
)

func TestMain(m *testing.M) { labtest.Main(m) }

// script returns a decision hook that gives the i-th impaired datagram
// ds[i] (zero: pass).
func script(ds map[int]decision) func() decision {
	i := 0
	return func() decision {
		d := ds[i]
		i++
		return d
	}
}

var (
	reorder0 = decision{reorder: [2]bool{true, false}}
	dupOnly  = decision{dup: true}
	lost     = decision{lost: true}
)

// pipelineCases are exact outcomes for packets 1..10 with ReorderDepth 3.
var pipelineCases = []struct {
	name string
	ds   map[int]decision
	drop func([]byte) bool
	want []wire.Seq
	st   Stats // the counts checked: Dropped, RuleDropped, Duplicated, Reordered
}{
	{"pass", nil, nil, seqs(1, 10), Stats{}},
	{"loss first", map[int]decision{0: lost}, nil, seqs(2, 10), Stats{Dropped: 1}},
	{"reorder second by depth 3", map[int]decision{1: reorder0}, nil,
		[]wire.Seq{1, 3, 4, 5, 2, 6, 7, 8, 9, 10}, Stats{Reordered: 1}},
	{"duplicate fourth", map[int]decision{3: dupOnly}, nil,
		[]wire.Seq{1, 2, 3, 4, 4, 5, 6, 7, 8, 9, 10}, Stats{Duplicated: 1}},
	{"duplicate copy reordered", map[int]decision{2: {dup: true, reorder: [2]bool{false, true}}}, nil,
		[]wire.Seq{1, 2, 3, 4, 5, 6, 3, 7, 8, 9, 10}, Stats{Duplicated: 1, Reordered: 1}},
	{"two adjacent reordered", map[int]decision{1: reorder0, 2: reorder0}, nil,
		[]wire.Seq{1, 4, 5, 2, 6, 3, 7, 8, 9, 10}, Stats{Reordered: 2}},
	{"tail reordered released by wait", map[int]decision{9: reorder0}, nil,
		seqs(1, 10), Stats{Reordered: 1}},
	{"last three reordered released by wait", map[int]decision{7: reorder0, 8: reorder0, 9: reorder0}, nil,
		seqs(1, 10), Stats{Reordered: 3}},
	{"rule drop keeps draws aligned", map[int]decision{5: lost}, DropSeqs(5),
		[]wire.Seq{1, 2, 3, 4, 7, 8, 9, 10}, Stats{Dropped: 1, RuleDropped: 1}},
	{"all lost", map[int]decision{0: lost, 1: lost, 2: lost, 3: lost, 4: lost, 5: lost, 6: lost, 7: lost, 8: lost, 9: lost}, nil,
		nil, Stats{Dropped: 10}},
}

func checkCounts(t *testing.T, want, got Stats, out int) {
	t.Helper()
	require.Equal(t, uint64(10), got.Seen)
	require.Equal(t, want.Dropped, got.Dropped, "Dropped")
	require.Equal(t, want.RuleDropped, got.RuleDropped, "RuleDropped")
	require.Equal(t, want.Duplicated, got.Duplicated, "Duplicated")
	require.Equal(t, want.Reordered, got.Reordered, "Reordered")
	require.Equal(t, uint64(out), got.Out, "Out")
	require.Zero(t, got.Held)
}

func TestPipelineExactReceiver(t *testing.T) {
	for _, tc := range pipelineCases {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f := newFake(t)
				c, err := NewReceiver(f, Config{Reorder: 0.5, ReorderWait: 30 * time.Millisecond, Drop: tc.drop})
				require.NoError(t, err)
				c.r.e.decideHook = script(tc.ds)
				f.push(packets(10)...)
				start := time.Now()
				// One more than expected: the last read must time out empty.
				got := readAll(t, c, len(tc.want)+1, 100*time.Millisecond)
				require.Equal(t, tc.want, got, "%+v held %d pending %d after %v", c.Stats(), c.r.e.held(), c.r.e.pending(), time.Since(start))
				if tc.st.Reordered > 0 && slices.Equal(tc.want, seqs(1, 10)) {
					require.GreaterOrEqual(t, time.Since(start), 30*time.Millisecond, "tail released before the wait")
				}
				checkCounts(t, tc.st, c.Stats(), len(tc.want))
				require.NoError(t, c.Close())
			})
		})
	}
}

func TestPipelineExactSender(t *testing.T) {
	for _, perCall := range []int{1, 10} {
		for _, tc := range pipelineCases {
			t.Run(tc.name+"/batch"+string(rune('0'+perCall/10))+string(rune('0'+perCall%10)), func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					f := newFake(t)
					c, err := NewSender(f, Config{Reorder: 0.5, ReorderWait: 30 * time.Millisecond, Drop: tc.drop})
					require.NoError(t, err)
					c.s.mu.Lock()
					c.s.e.decideHook = script(tc.ds)
					c.s.mu.Unlock()
					ps := packets(10)
					b := sock.NewBatch(perCall, 0)
					for i := 0; i < len(ps); i += perCall {
						for j := range perCall {
							b.Msgs[j].Buf = ps[i+j]
							b.Msgs[j].Addr = fakeAddr
						}
						n, err := c.WriteBatch(b, perCall)
						require.NoError(t, err)
						require.Equal(t, perCall, n)
					}
					// A second on the bubble's clock is past every ReorderWait
					// (30 ms): all that is held has been released, and nothing
					// more may come.
					time.Sleep(time.Second)
					synctest.Wait()
					var got []wire.Seq
					for _, d := range f.sentSnapshot() {
						got = append(got, seqOf(t, d.data))
						require.Equal(t, fakeAddr, d.to)
					}
					require.Equal(t, tc.want, got)
					checkCounts(t, tc.st, c.Stats(), len(tc.want))
					require.NoError(t, c.Close())
				})
			})
		}
	}
}
