package statsd

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// Bus message layout (see "Bus format" in the package doc). Part of the
// wire format; do not change.
const (
	// Version is the first byte of every bus message.
	Version      = 1
	versionOff   = 0
	timeOff      = 1
	timeLen      = 8
	linesOff     = timeOff + timeLen
	HeaderLen    = linesOff // bytes before the lines
	lineSep      = '\n'
	maxTimestamp = 1<<63 - 1
)

// Errors of ParseMessage.
var (
	// ErrBadVersion: the first byte is not Version.
	ErrBadVersion = errors.New("statsd: bus message of an unknown version")
	// ErrBadTime: the relay time is negative.
	ErrBadTime = errors.New("statsd: bus message with a negative time")
)

// Message is one decoded bus message.
type Message struct {
	// Time is the relay's clock when it sealed the message, in Unix
	// nanoseconds. It places every metric of the message in a flush
	// interval.
	Time int64
	// Lines are the metric lines, separated by '\n'; empty for a clock
	// tick. They point into the decoded buffer.
	Lines []byte
}

// AppendMessageHeader appends a message header with time t (Unix ns) to
// b; the lines follow, each ended by '\n'.
func AppendMessageHeader(b []byte, t int64) []byte {
	b = append(b, Version)
	return binary.BigEndian.AppendUint64(b, uint64(t))
}

// ParseMessage decodes a bus message without copying: Lines points into b.
// Short input returns io.ErrUnexpectedEOF. The lines themselves are not
// checked here: Parser checks each as it would a datagram's.
func ParseMessage(b []byte) (Message, error) {
	if len(b) < HeaderLen {
		return Message{}, fmt.Errorf("statsd: bus message of %d bytes: %w", len(b), io.ErrUnexpectedEOF)
	}
	if b[versionOff] != Version {
		return Message{}, fmt.Errorf("%w: %d", ErrBadVersion, b[versionOff])
	}
	t := binary.BigEndian.Uint64(b[timeOff:])
	if t > maxTimestamp {
		return Message{}, ErrBadTime
	}
	return Message{Time: int64(t), Lines: b[linesOff:]}, nil
}
