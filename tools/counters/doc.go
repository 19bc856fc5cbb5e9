// Package counters keeps a process's counters in a small memory-mapped
// file that other processes read live, the way Aeron's CnC counters file
// is read by AeronStat: `mdbus stat` lists the mdbus processes of a host
// and shows their counters, a Prometheus handler renders them, and any
// program can map the file read-only.
//
// # File format
//
// Little-endian, one file per process, DIR/ROLE-PID.ctr, where DIR is
// by default DefaultDir(), /dev/shm/mdbus-UID (tmpfs, one per user):
//
//	offset  size  header (HeaderSize = 4096 bytes, one page)
//	     0     8  magic "MDBUSCTR"
//	     8     4  version (1)
//	    12     4  header size (4096)
//	    16     4  slot size (256)
//	    20     4  slot count N (<= MaxSlots)
//	    24     8  pid of the writer
//	    32     8  writer's start time, clock ticks after boot (/proc/PID/stat field 22)
//	    40     8  created, Unix ns
//	    48     8  epoch (atomic): sampling passes x 2, odd while a pass writes
//	    56     8  last pass, Unix ns (atomic)
//	    64     8  counters that found no free slot (atomic)
//	    72     8  sampling interval, ns
//	   128    32  role, NUL padded
//	   160  3936  command line, NUL padded
//
//	slot i at 4096 + i*256:
//	     0     8  value, int64 (atomic; alone on its cache line)
//	    64     8  description sequence (atomic): 0 never used, odd while changing
//	    72     4  kind (a Kind: stable id of what is counted)
//	    76     1  type: 0 free, 1 counter, 2 gauge
//	    77     1  label length (<= 48)
//	    78     1  owner length (<= 128)
//	    80    48  label: refines the kind (a verdict, a drop reason, a field name)
//	   128   128  owner: "NAME" or "NAME/SESSION@SOURCE" for a stream
//
// The layout constants are part of the file format; do not change them.
// A pid and a start time name a process uniquely: a file whose pid is gone,
// or belongs to a process started at another time (a reused pid), is
// stale, and Scan says so; Clean removes such files.
//
// # Trust: a private directory per user
//
// Each user's files live in a directory of their own, created mode 0700
// (files 0600). A directory that others may write to (/dev/shm itself is
// 1777, so anyone can create a name there first), that is a symbolic
// link, that belongs to another user, or that is named DirPrefix+UID but
// belongs to someone else, is refused by writers and readers alike
// (ErrNotPrivate): its files could be planted or replaced.
//
// Readers trust nothing they find even there. Scan checks each name
// before opening it and opens it without following links or blocking
// (O_NOFOLLOW|O_NONBLOCK), then checks the open file again: a FIFO,
// link, device, socket or directory, a file of another owner than the
// directory's, or a file naming a live process that runs as another
// user is listed as Skipped with the reason, never read. Strings in a
// file (role, command line, labels, owners) are whatever its writer put
// there: a program that prints them to a terminal escapes control
// characters first, as mdbus stat does.
//
// Root reads every user's directory (Scan accepts any owner for root and
// checks each file against its directory's owner): `mdbus stat
// --all-users` shows every /dev/shm/mdbus-* at once.
//
// # Writing: sampled, not inline
//
// The roles (publisher, subscriber, retransmit) already count everything
// with atomics of their own and return it from Stats. A File does not
// touch their hot paths: a sampling goroutine owned by the File calls the
// functions given to Sample every Config.Interval (100 ms) and copies the
// Stats snapshots into the slots (AttachPublisher, AttachSubscriber,
// AttachServer, AttachCache, AttachRewinder; AttachStruct for any role
// whose stats are a struct). So the hot paths keep 0 allocations and the
// same ns/op by construction: no extra store, no extra cache line written
// per message, no second copy of each counter to keep in step. The price is
// staleness of up to one interval, which a human at `mdbus stat` or a
// Prometheus scrape every 15 s does not see; Stats stays the exact,
// immediate answer inside the process. Updating slots inline would have
// added a store to a shared mapping per message per counter in packages
// this one must not change, for freshness nobody reads faster than 10 Hz.
// Roles that have no Stats may still set a Slot inline: Set and Add are
// single atomic operations that never allocate. What a pass costs the role
// is its Stats call: the subscriber's takes its state lock for a few
// microseconds (percentiles of the recovery histograms), ten times a
// second; the publisher's and the server's are atomic loads.
//
// Per stream the subscriber exposes no time of the last heartbeat, so the
// "age" gauge is the time since the stream's next, horizon or end
// sequence last moved, as the sampler saw it (StreamProgressAge): on a
// live stream it stays near zero; on a stream idling on heartbeats it
// grows, as it does on a stalled one. A rewinder's own feed streams are
// not exposed by retransmit.Rewinder either: it gets totals only.
//
// # Consistency
//
// Each slot has one writer. Values are 64-bit atomic stores, so a reader
// (atomic 64-bit loads through its own mapping) always sees a value that
// was stored, never a torn one. A slot's description (kind, type, label,
// owner) is guarded by a per-slot sequence lock: the writer makes the
// sequence odd, rewrites the description and zeroes the value, then makes
// it even; a reader that sees the sequence change retries, so a value is
// never reported under the description of a slot's previous owner. Each
// sampling pass makes the header's epoch odd while it writes: a reader
// that sees the same even epoch before and after reading every slot has a
// snapshot of one pass (Snapshot.Consistent); otherwise it retries a few
// times, then returns values that may straddle two passes. The writer
// never waits for a reader.
//
// Streams come and go: a subscriber's streams get slots when first seen
// (up to MaxStreams per subscriber) and Free them when the subscriber
// forgets the stream, for reuse. When no slot is free, Add returns a
// detached Slot that works in memory and counts it in the header.
//
// # Usage
//
//	f, err := counters.Create(counters.Config{Role: "sub"})
//	if err != nil { ... }
//	defer f.Close() // removes the file
//	counters.AttachSubscriber(f, "sub", s)
//	http.Handle("/metrics", counters.Handler(f))
//
// Reading another process:
//
//	es, _ := counters.Scan(counters.DefaultDir())
//	r, _ := counters.Open(es[0].Path)
//	snap, _ := r.Snapshot()
//
// File, Reader and Scan are Linux-only (mmap, /proc).
package counters
