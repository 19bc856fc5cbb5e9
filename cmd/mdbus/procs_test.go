package main

import (
	"flag"
	"io"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestFeedProcs checks the Go processors a subscriber process asks for:
// one per feed reader unless --procs or a GOMAXPROCS variable says
// otherwise.
func TestFeedProcs(t *testing.T) {
	var got []int
	old := procsHook
	procsHook = func(n int) int { got = append(got, n); return 0 }
	t.Cleanup(func() { procsHook = old })
	for _, tc := range []struct {
		name  string
		args  []string
		env   string
		feeds int
		want  []int // nil: the Go runtime's default stays
	}{
		{"default", nil, "", 1, []int{1}},
		{"A/B feeds", nil, "", 2, []int{2}},
		{"given", []string{"--procs", "3"}, "", 2, []int{3}},
		{"given one with two feeds", []string{"--procs", "1"}, "", 2, []int{1}},
		{"runtime default", []string{"--procs", "0"}, "", 1, nil},
		{"GOMAXPROCS variable", nil, "4", 1, nil},
		{"flag over variable", []string{"--procs", "2"}, "4", 1, []int{2}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("GOMAXPROCS", tc.env)
			got = nil
			fs := flag.NewFlagSet("x", flag.ContinueOnError)
			ff := addFeedFlags(fs)
			require.NoError(t, fs.Parse(tc.args))
			require.NoError(t, ff.setProcs(fs, tc.feeds))
			require.Equal(t, tc.want, got)
		})
	}
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	ff := addFeedFlags(fs)
	require.NoError(t, fs.Parse([]string{"--procs", "-1"}))
	require.ErrorContains(t, ff.setProcs(fs, 1), "--procs -1")
	require.NoError(t, fs.Parse([]string{"--procs", "1000000000"}))
	require.ErrorContains(t, ff.setProcs(fs, 1), "--procs 1000000000: want a count of Go processors from 1 to 1024", "the runtime would allocate a billion processors")
}
