//go:build unix

package counters

import (
	"bytes"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// PromtoolCheck runs `promtool check metrics` on text, skipping when
// promtool is missing (apt-get install prometheus) outside CI.
func promtoolCheck(t *testing.T, text []byte) {
	t.Helper()
	path, err := exec.LookPath("promtool")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("promtool not found: apt-get install prometheus")
		}
		t.Skip("promtool not found: apt-get install prometheus")
	}
	cmd := exec.Command(path, "check", "metrics")
	cmd.Stdin = bytes.NewReader(text)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "promtool: %s\n%s", out, text)
}

func TestPrometheusHandler(t *testing.T) {
	f := create(t, Config{Role: "rewind", Interval: -1})
	f.Add(RetrRequests, Free, "answered", "rewind").Set(3)
	f.Add(RetrRequests, Free, "refused-rate-limited", "rewind").Set(1)
	f.Add(StreamGaps, Free, "", `sub/SESS"1\@127.0.0.1:5`).Set(2)
	f.Add(CacheMessages, Free, "", "rewind").Set(100)
	f.Add(KindCustom, Counter, "weird name-é", "rewind").Set(4)
	rec := httptest.NewRecorder()
	Handler(f).ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	body := rec.Body.Bytes()
	require.Contains(t, rec.Header().Get("Content-Type"), "text/plain")
	for _, want := range []string{
		`mdbus_retransmit_requests_total{role="rewind",owner="rewind",verdict="answered"} 3`,
		`mdbus_retransmit_requests_total{role="rewind",owner="rewind",verdict="refused-rate-limited"} 1`,
		`mdbus_stream_gaps_total{role="rewind",owner="sub",stream="SESS\"1\\@127.0.0.1:5"} 2`,
		`# TYPE mdbus_cache_messages gauge`,
		`mdbus_rewind_weird_name____total{role="rewind",owner="rewind"} 4`,
		`go_goroutines `,
	} {
		require.Contains(t, string(body), want)
	}
	require.Equal(t, 1, strings.Count(string(body), "# TYPE mdbus_retransmit_requests_total counter"))
	promtoolCheck(t, body)
}
