package resume

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/mdbus/mdbus/wire"
)

// StartKind says where a stream with no checkpoint starts.
type StartKind uint8

// Start kinds.
const (
	// StartLive (the default) delivers from the first message heard.
	StartLive StartKind = iota
	// StartSession delivers each session from its first sequence (1).
	StartSession
	// StartSeq delivers from sequence Start.Seq.
	StartSeq
	// StartTime delivers from the first message journaled at or after
	// Start.Time (needs a Journal to map the time to a sequence).
	StartTime
)

// Start is a start position.
type Start struct {
	Kind StartKind
	Seq  wire.Seq // StartSeq
	Time int64    // StartTime: ns since the Unix epoch
}

// ParseStart parses "live", "session", "seq:N" or "time:RFC3339".
func ParseStart(s string) (Start, error) {
	switch {
	case s == "" || s == "live":
		return Start{}, nil
	case s == "session":
		return Start{Kind: StartSession}, nil
	case strings.HasPrefix(s, "seq:"):
		n, err := strconv.ParseUint(s[4:], 10, 64)
		if err != nil || n == 0 {
			return Start{}, fmt.Errorf("resume: start %q: want seq:N with N a sequence number from 1", s)
		}
		return Start{Kind: StartSeq, Seq: wire.Seq(n)}, nil
	case strings.HasPrefix(s, "time:"):
		t, err := time.Parse(time.RFC3339Nano, s[5:])
		if err != nil {
			return Start{}, fmt.Errorf("resume: start %q: want time:2026-11-30T14:30:00Z (RFC 3339)", s)
		}
		return Start{Kind: StartTime, Time: t.UnixNano()}, nil
	}
	return Start{}, fmt.Errorf("resume: start %q: want live, session, seq:N or time:RFC3339", s)
}

// String formats s as ParseStart reads it.
func (s Start) String() string {
	switch s.Kind {
	case StartSession:
		return "session"
	case StartSeq:
		return fmt.Sprintf("seq:%d", s.Seq)
	case StartTime:
		return "time:" + time.Unix(0, s.Time).UTC().Format(time.RFC3339Nano)
	}
	return "live"
}
