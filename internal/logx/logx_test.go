package logx

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func lines(b *bytes.Buffer) []map[string]any {
	var out []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(b.String()), "\n") {
		if l == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			panic(err)
		}
		out = append(out, m)
	}
	return out
}

func TestStormIsOneLinePerInterval(t *testing.T) {
	var b bytes.Buffer
	h := NewRateLimited(slog.NewJSONHandler(&b, nil), time.Second, 2)
	now := time.Unix(1000, 0)
	h.st.now = func() time.Time { return now }
	log := slog.New(h).With("role", "sub")
	// 1000 malformed packets in the first second, interleaved with another
	// message that has its own budget.
	for i := range 1000 {
		log.Warn("malformed packet", "from", "10.0.0.1:5", "i", i)
		if i%500 == 0 {
			log.Info("other")
		}
		now = now.Add(time.Millisecond)
	}
	got := lines(&b)
	require.Len(t, got, 4) // 2 malformed + 2 other
	require.Equal(t, "malformed packet", got[0]["msg"])
	require.Equal(t, "sub", got[0]["role"])
	require.Nil(t, got[0]["suppressed"])
	// The next window: its first record reports the 998 held back.
	b.Reset()
	now = now.Add(time.Second)
	log.Warn("malformed packet", "i", 1000)
	got = lines(&b)
	require.Len(t, got, 1)
	require.Equal(t, float64(998), got[0]["suppressed"])
	require.Equal(t, float64(1000), got[0]["i"])
	// Held back again, then Flush reports the rest.
	b.Reset()
	for i := range 10 {
		log.Warn("malformed packet", "i", 1001+i)
	}
	h.Flush()
	got = lines(&b)
	require.Len(t, got, 2)
	require.Equal(t, float64(9), got[1]["suppressed"])
	require.Equal(t, float64(1010), got[1]["i"], "the last record held back")
	b.Reset()
	h.Flush()
	require.Empty(t, b.String(), "nothing left to flush")
}

func TestKeysBounded(t *testing.T) {
	h := NewRateLimited(slog.NewTextHandler(&bytes.Buffer{}, nil), time.Second, 1)
	log := slog.New(h)
	for i := range 3 * maxKeys {
		log.Info("msg " + strings.Repeat("x", i%50) + string(rune(i)))
	}
	require.LessOrEqual(t, len(h.st.keys), maxKeys)
}

func TestNew(t *testing.T) {
	var b bytes.Buffer
	log, err := New(&b, "json", "warn")
	require.NoError(t, err)
	log.Info("hidden")
	log.Error("shown", "err", "boom")
	got := lines(&b)
	require.Len(t, got, 1)
	require.Equal(t, "ERROR", got[0]["level"])
	b.Reset()
	log, err = New(&b, "text", "debug")
	require.NoError(t, err)
	log.Debug("x", "k", 1)
	require.Contains(t, b.String(), "level=DEBUG msg=x k=1")
	_, err = New(&b, "xml", "info")
	require.ErrorContains(t, err, "want text or json")
	_, err = New(&b, "text", "loud")
	require.ErrorContains(t, err, "want debug, info, warn or error")
}

func TestDisabled(t *testing.T) {
	var b bytes.Buffer
	log := slog.New(NewRateLimited(slog.NewTextHandler(&b, nil), 0, 0))
	for range 10 {
		log.Info("same")
	}
	require.Equal(t, 10, strings.Count(b.String(), "msg=same"))
}
