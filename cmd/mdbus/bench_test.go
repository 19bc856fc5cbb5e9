package main

import (
	"bytes"
	"context"
	"errors"
	"testing"

	"github.com/mdbus/mdbus/bench"
	"github.com/stretchr/testify/require"
)

func TestCapacityMatrixFlags(t *testing.T) {
	m, err := capacityMatrix(" 1472, 8972", "1,4", []bench.System{bench.Mdbus, bench.Raw})
	require.NoError(t, err)
	require.Equal(t, []int{1472, 8972}, m.PayloadSizes)
	require.Equal(t, []int{1, 4}, m.Subscribers)
	for _, tc := range []struct{ payloads, subs, want string }{
		{"1472,big", "1", "--payload-sizes"},
		{"10", "1", "--payload-sizes"},
		{"70000", "1", "--payload-sizes"},
		{"1472", "0", "--sub-counts"},
		{"1472", "1,99", "--sub-counts"},
		{"1472", "", "--sub-counts"},
	} {
		_, err := capacityMatrix(tc.payloads, tc.subs, nil)
		require.ErrorIs(t, err, errUsage, tc)
		require.Contains(t, err.Error(), tc.want)
	}
}

// Bad flags stop before anything runs (no lab needed: nothing opens a
// socket).
func TestBenchCapacityFlagErrors(t *testing.T) {
	for _, args := range [][]string{
		{"capacity", "--probe", "-1s"},
		{"capacity", "--resolution", "1.5"},
		{"capacity", "--max-probes", "0"},
		{"capacity", "--budget", "0s"},
		{"capacity", "--sub-counts", "x"},
		{"latency", "--mode", "pingpong,sideways"},
		{"goals", "--capacity-from", "/no/such/file.json"},
		{"goals", "--headroom", "--max-probes", "0"},
	} {
		err := runBench(context.Background(), append(args, "--netns=false", "--out", ""), &bytes.Buffer{})
		require.True(t, errors.Is(err, errUsage), "%v: %v", args, err)
	}
}
