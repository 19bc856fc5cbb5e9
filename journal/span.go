package journal

import (
	"fmt"
	"io"

	"github.com/mdbus/mdbus/wire"
)

// Span selects a part of one stream: the records from sequence From (or,
// when From is 0, from the first record at or after FromTime) through
// sequence Last and time ToTime. A zero field does not bound; the zero
// Span is the whole stream. Times are ns since the Unix epoch.
type Span struct {
	From, Last       wire.Seq // Last is included
	FromTime, ToTime int64
}

// OpenSpan opens a reader of stream id positioned at the start of sp;
// its Next returns io.EOF after sp's last record.
func (j *Journal) OpenSpan(id wire.StreamID, sp Span) (*SpanReader, error) {
	rd, err := j.OpenReader(id)
	if err != nil {
		return nil, err
	}
	switch {
	case sp.From != 0:
		err = rd.SeekSeq(sp.From)
	case sp.FromTime != 0:
		err = rd.SeekTime(sp.FromTime)
	}
	if err != nil {
		rd.Close()
		return nil, fmt.Errorf("journal: stream %s: seek: %w", id, err)
	}
	return &SpanReader{rd: rd, sp: sp}, nil
}

// SpanReader reads the records of a Span, in sequence order. It is not
// safe for concurrent use.
type SpanReader struct {
	rd *Reader
	sp Span
}

// Next returns the next record of the span, or io.EOF past its end (or
// the stream's). The record's Data is valid until the next call.
func (r *SpanReader) Next() (Record, error) {
	rec, err := r.rd.Next()
	if err != nil {
		return rec, err
	}
	if r.sp.Last != 0 && rec.Seq > r.sp.Last || r.sp.ToTime != 0 && rec.Time > r.sp.ToTime {
		return Record{}, io.EOF
	}
	return rec, nil
}

// Close closes the reader.
func (r *SpanReader) Close() error { return r.rd.Close() }

// Extent tells what sp holds of the stream described by in, as far as in
// can tell without reading: records, the number of records when sp is
// bounded by sequence only (0 when unknown or empty), and lastTime, the
// time of its last record when sp has no Last bound (0 when unknown).
// A replay's progress estimate uses them.
func (sp Span) Extent(in StreamInfo) (records uint64, lastTime int64) {
	if in.Next <= in.First {
		return 0, 0
	}
	first, last := max(in.First, sp.From), in.Next-1
	if sp.Last != 0 {
		last = min(last, sp.Last)
	}
	if sp.FromTime == 0 && sp.ToTime == 0 && last >= first {
		records = uint64(last-first) + 1
	}
	if sp.Last == 0 {
		lastTime = in.LastTime
		if sp.ToTime != 0 {
			lastTime = min(sp.ToTime, in.LastTime)
		}
	}
	return records, lastTime
}
