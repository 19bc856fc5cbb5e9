package counters

import (
	"reflect"
	"strings"
	"time"
	"unicode"

	"github.com/mdbus/mdbus/publisher"
	"github.com/mdbus/mdbus/recorder"
	"github.com/mdbus/mdbus/retransmit"
	"github.com/mdbus/mdbus/subscriber"
	"github.com/mdbus/mdbus/wire"
)

// AttachPublisher samples p's Stats into slots owned by name.
func AttachPublisher(f *File, name string, p *publisher.Publication) {
	sl := func(k Kind) *Slot { return f.Add(k, Free, "", name) }
	published, msgs, pkts, bytes := sl(PubPublished), sl(PubMessages), sl(PubPackets), sl(PubBytes)
	hbs, errs, full := sl(PubHeartbeats), sl(PubSendErrors), sl(PubQueueFull)
	next := f.Add(PubNextSeq, Free, p.Session().String(), name) // the session lets a reader match its subscribers' streams
	f.Sample(func(time.Time) {
		st := p.Stats()
		published.SetUint(st.Published)
		msgs.SetUint(st.Messages)
		pkts.SetUint(st.Packets)
		bytes.SetUint(st.Bytes)
		hbs.SetUint(st.Heartbeats)
		errs.SetUint(st.SendErrors)
		next.SetUint(uint64(p.NextSeq()))
		full.SetUint(st.QueueFull)
	})
}

// MaxStreams bounds the streams of one subscriber that get slots: a feed
// with more streams than that shows its totals, and the first MaxStreams
// streams (slots of streams that go away are reused).
const MaxStreams = 32

// AttachSubscriber samples s's Stats and per-stream state into slots owned
// by name (per stream: "NAME/SESSION@SOURCE"). Streams that go away give
// their slots back.
func AttachSubscriber(f *File, name string, s *subscriber.Subscriber) {
	AttachSubscriberFuncs(f, name, s.Stats, s.Streams)
}

// AttachSubscriberFuncs is AttachSubscriber for a role that wraps its
// subscriber (a resuming consumer, a rewinder): stats gives the totals,
// streams the per-stream state (nil: totals only).
func AttachSubscriberFuncs(f *File, name string, stats func() subscriber.Stats, streams func() []subscriber.StreamStats) {
	if streams == nil {
		streams = func() []subscriber.StreamStats { return nil }
	}
	sl := func(k Kind) *Slot { return f.Add(k, Free, "", name) }
	dgrams, pkts, msgs, bytes := sl(SubDatagrams), sl(SubPackets), sl(SubMessages), sl(SubBytes)
	dups, gaps, naks, repairs := sl(SubDupDropped), sl(SubGaps), sl(SubNAKs), sl(SubRepairs)
	rec, lost, kdrops, held := sl(SubRecovered), sl(SubLost), sl(SubKernelDrops), sl(SubHeld)
	nstreams, hbs, failovers := sl(SubStreams), sl(SubHeartbeats), sl(SubFailovers)
	var drops [subscriber.NumDropReasons]*Slot // added at the first drop of each reason
	type streamSlots struct {
		slots    [15]*Slot
		seen     bool
		progress time.Time
		next     wire.Seq
		horizon  wire.Seq
		end      wire.Seq
	}
	per := map[subscriber.StreamID]*streamSlots{}
	f.Sample(func(now time.Time) {
		st := stats()
		dgrams.SetUint(st.Datagrams)
		pkts.SetUint(st.Packets)
		msgs.SetUint(st.Messages)
		bytes.SetUint(st.Bytes)
		dups.SetUint(st.Duplicates)
		gaps.SetUint(st.Gaps)
		naks.SetUint(st.NAKs)
		repairs.SetUint(st.Repairs)
		rec.SetUint(st.Recovered)
		lost.SetUint(st.LostMessages)
		kdrops.SetUint(st.KernelDrops)
		held.Set(int64(st.Held))
		nstreams.Set(int64(st.Streams))
		hbs.SetUint(st.Heartbeats)
		failovers.SetUint(st.Failovers)
		for r, n := range st.Drops {
			if n == 0 {
				continue
			}
			if drops[r] == nil {
				drops[r] = f.Add(SubDropped, Free, subscriber.DropReason(r).String(), name)
			}
			drops[r].SetUint(n)
		}
		for _, ss := range per {
			ss.seen = false
		}
		for _, x := range streams() {
			ss := per[x.ID]
			if ss == nil {
				if len(per) >= MaxStreams {
					continue
				}
				owner := name + "/" + x.ID.String()
				ss = &streamSlots{progress: now}
				for i, k := range [...]Kind{StreamNextSeq, StreamMessages, StreamBytes, StreamGaps, StreamNAKs, StreamRepairs,
					StreamPending, StreamLost, StreamDupDropped, StreamHeld, StreamProgressAge, StreamRecovered,
					StreamHorizon, StreamState, StreamRecoveryP99} {
					ss.slots[i] = f.Add(k, Free, "", owner)
				}
				per[x.ID] = ss
			}
			ss.seen = true
			if x.Next != ss.next || x.Horizon != ss.horizon || x.End != ss.end {
				ss.next, ss.horizon, ss.end, ss.progress = x.Next, x.Horizon, x.End, now
			}
			v := [...]int64{int64(x.Next), int64(x.Delivered), int64(x.Bytes), int64(x.Gaps), int64(x.NAKs), int64(x.Repairs),
				int64(x.Missing), int64(x.LostMessages), int64(x.Duplicates), int64(x.Held), now.Sub(ss.progress).Milliseconds(),
				int64(x.Recovered), int64(x.Horizon), int64(streamState(x)), x.RecoveryP99.Microseconds()}
			for i, s := range ss.slots {
				s.Set(v[i])
			}
		}
		for id, ss := range per {
			if !ss.seen { // the subscriber forgot the stream: free its slots for the next
				for _, s := range ss.slots {
					f.Free(s)
				}
				delete(per, id)
			}
		}
	})
}

func streamState(x subscriber.StreamStats) StreamStateValue {
	switch {
	case x.Ended:
		return StreamEnded
	case x.Stopped:
		return StreamStopped
	case x.Replaced || x.Superseded:
		return StreamReplaced
	}
	return StreamRunning
}

// AttachLatency samples a one-way latency p99 (ok false: none measured
// yet) into a SubLatencyP99 slot owned by name, added at the first
// measurement. p99 runs on the sampling goroutine ten times a second: it
// should return a figure the role already computed (mdbus sub: its last
// --stats interval), not compute percentiles under the role's lock.
func AttachLatency(f *File, name string, p99 func() (time.Duration, bool)) {
	var s *Slot
	f.Sample(func(time.Time) {
		d, ok := p99()
		if !ok {
			return
		}
		if s == nil {
			s = f.Add(SubLatencyP99, Free, "", name)
		}
		s.Set(d.Microseconds())
	})
}

// AttachServer samples a retransmit server's Stats (requests by verdict,
// repairs sent) into slots owned by name.
func AttachServer(f *File, name string, stats func() retransmit.ServerStats) {
	verdicts := [...]string{"received", "answered", "capped", "partial", "held", "told-later",
		"refused-bad-source", "refused-not-allowed", "refused-malformed", "refused-unknown-session",
		"refused-coalesced", "refused-out-of-range", "refused-too-large", "refused-rate-limited", "refused-source-error"}
	var req [len(verdicts)]*Slot
	for i, v := range verdicts {
		req[i] = f.Add(RetrRequests, Free, v, name)
	}
	upk, mpk := f.Add(RetrPackets, Free, "unicast", name), f.Add(RetrPackets, Free, "multicast", name)
	ub, mb := f.Add(RetrBytes, Free, "unicast", name), f.Add(RetrBytes, Free, "multicast", name)
	msgs := f.Add(RetrMessages, Free, "", name)
	serr, rerr, kd := f.Add(RetrErrors, Free, "send", name), f.Add(RetrErrors, Free, "read", name), f.Add(RetrErrors, Free, "kernel-drop", name)
	f.Sample(func(time.Time) {
		st := stats()
		r := st.Refused
		for i, v := range [...]uint64{st.Requests, st.Answered, st.Capped, st.Partial, st.Deferred, st.ToldLater,
			r.BadSource, r.NotAllowed, r.Malformed(), r.UnknownSession,
			st.Coalesced, r.OutOfRange, r.TooLarge, r.RateLimited, r.SourceError} {
			req[i].SetUint(v)
		}
		upk.SetUint(st.UnicastPackets)
		mpk.SetUint(st.MulticastPackets)
		ub.SetUint(st.UnicastBytes)
		mb.SetUint(st.MulticastBytes)
		msgs.SetUint(st.Messages)
		serr.SetUint(st.SendErrors)
		rerr.SetUint(st.ReadErrors)
		kd.SetUint(st.KernelDrops)
	})
}

// AttachCache samples a retransmit cache (depth, bytes, sessions,
// evictions) into slots owned by name; sessions, where the caller knows
// them (a publisher's own), also get the span of sequences cached.
func AttachCache(f *File, name string, c *retransmit.Cache, sessions func() []wire.Session) {
	depth, bytes, nsess, ev := f.Add(CacheMessages, Free, "", name), f.Add(CacheBytes, Free, "", name),
		f.Add(CacheSessions, Free, "", name), f.Add(CacheEvicted, Free, "", name)
	spans := map[wire.Session]*Slot{}
	f.Sample(func(time.Time) {
		st := c.Stats()
		depth.SetUint(st.Messages)
		bytes.SetUint(st.Bytes)
		nsess.Set(int64(st.Sessions))
		ev.SetUint(st.Evicted)
		if sessions == nil {
			return
		}
		for _, s := range sessions() {
			first, next, ok := c.Bounds(s)
			if !ok {
				continue
			}
			sl := spans[s]
			if sl == nil {
				if len(spans) >= MaxStreams {
					continue
				}
				sl = f.Add(CacheSpan, Free, s.String(), name)
				spans[s] = sl
			}
			sl.Set(int64(next - first))
		}
	})
}

// AttachRewinder samples a rewinder: its feed subscriber (owner
// NAME-feed), its server and cache (NAME), and its journal writes
// (NAME-journal, from the first write: none without a journal).
func AttachRewinder(f *File, name string, rw *recorder.Rewinder) {
	AttachSubscriberFuncs(f, name+"-feed", rw.FeedStats, nil)
	AttachServer(f, name, rw.ServerStats)
	AttachCache(f, name, rw.Cache(), nil)
	AttachStruct(f, name+"-journal", func() any {
		if ts, _ := rw.JournalStats(); ts != (recorder.TapStats{}) {
			return ts
		}
		return nil // no journal, or nothing journaled yet: no slots
	})
}

// AttachRecorder samples a recorder: its feed subscriber (NAME-feed) and
// what it journaled (NAME).
func AttachRecorder(f *File, name string, rec *recorder.Recorder) {
	AttachSubscriberFuncs(f, name+"-feed", rec.FeedStats, nil)
	AttachStruct(f, name, func() any { ts, _ := rec.Stats(); return ts })
}

// AttachStruct samples any role whose stats are a struct: stats returns
// the struct (or a pointer to one; nil: nothing this pass) and every integer or time.Duration
// field, nested structs included, gets a KindCustom slot labelled with
// its snake_case path (unsigned integers are counters, signed ones and
// durations gauges; durations in nanoseconds with a "_ns" suffix). It is
// the one-line attachment of a new role:
//
//	counters.AttachStruct(f, "record", func() any { return rec.Stats() })
//
// The field walk allocates; it runs on the sampling goroutine only.
func AttachStruct(f *File, name string, stats func() any) {
	slots := map[string]*Slot{}
	f.Sample(func(time.Time) {
		walkStruct(reflect.ValueOf(stats()), "", func(path string, typ Type, v int64) {
			s := slots[path]
			if s == nil {
				s = f.Add(KindCustom, typ, path, name)
				slots[path] = s
			}
			s.Set(v)
		})
	})
}

var durationType = reflect.TypeFor[time.Duration]()

func walkStruct(v reflect.Value, prefix string, emit func(string, Type, int64)) {
	for v.Kind() == reflect.Pointer || v.Kind() == reflect.Interface {
		if v.IsNil() {
			return
		}
		v = v.Elem()
	}
	if v.Kind() != reflect.Struct {
		return
	}
	t := v.Type()
	for i := range t.NumField() {
		fld := t.Field(i)
		if !fld.IsExported() {
			continue
		}
		path := prefix + snake(fld.Name)
		fv := v.Field(i)
		switch {
		case fv.Type() == durationType:
			emit(path+"_ns", Gauge, fv.Int())
		case fv.CanUint():
			emit(path, Counter, int64(fv.Uint()))
		case fv.CanInt():
			emit(path, Gauge, fv.Int())
		case fv.Kind() == reflect.Struct:
			walkStruct(fv, path+"_", emit)
		}
	}
}

// snake turns "KernelDrops" into "kernel_drops" and "NAKs" into "naks".
func snake(s string) string {
	var b strings.Builder
	r := []rune(s)
	for i, c := range r {
		if unicode.IsUpper(c) && i > 0 && (unicode.IsLower(r[i-1]) || i+1 < len(r) && unicode.IsLower(r[i+1]) && unicode.IsUpper(r[i-1]) && r[i+1] != 's') {
			b.WriteByte('_')
		}
		b.WriteRune(unicode.ToLower(c))
	}
	return b.String()
}
