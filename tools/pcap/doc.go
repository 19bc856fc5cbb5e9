// Package pcap brings MoldUDP64 traffic in from packet captures and writes
// journal streams out as captures, so that real feeds can be journaled or
// replayed and journals can be read by Wireshark and tshark.
//
// The file formats (pcap of either timestamp resolution and byte order,
// pcapng, gzip-compressed or not) are read and written with
// github.com/gopacket/gopacket/pcapgo, the maintained fork of
// google/gopacket. The headers inside each frame are decoded here, by
// hand: the path is small, bounded, fuzzed, allocates nothing per frame,
// and gives every frame that yields no datagram one stable Reason.
//
// # Import
//
// A Reader reads one capture and returns its MoldUDP64 downstream
// datagrams as Events (capture time in ns, UDP source and destination,
// the datagram bytes), optionally only those to some destination ports or
// addresses (Config.Ports, Config.Dsts). It decodes:
//
//	link      Ethernet II with any stack of up to 8 802.1Q / 802.1ad (QinQ)
//	          tags, Linux cooked capture v1 (SLL) and v2 (SLL2), raw IP
//	          (LINKTYPE_RAW, LINKTYPE_IPV4, LINKTYPE_IPV6), BSD null/loop;
//	          in pcapng each interface with its own link type and
//	          timestamp resolution
//	network   IPv4 (with options), IPv6 with hop-by-hop, routing,
//	          destination-options, fragment and AH extension headers
//	transport UDP
//	payload   a valid MoldUDP64 downstream packet (wire.ParsePacket):
//	          data, heartbeat or end of session
//
// Every frame is counted once in Stats: as an Event, or under the Reason
// it was skipped (not IP, not UDP, truncated by the capture, malformed,
// filtered, a MoldUDP64 re-request, not MoldUDP64, a fragment held for
// reassembly or lost). Frames the capture cut (caplen < len) are counted;
// one whose UDP datagram survived whole still yields it. Checksums are not
// verified: a capture taken on the sending host carries the zero or
// partial checksums of checksum offload.
//
// IP fragments (IPv4 and IPv6) are reassembled within bounds
// (Reassembly): at most 64 datagrams in flight and 4 MiB held, a 30 s
// timeout in capture time, at most 256 fragments and 65535 bytes per
// datagram; overlapping fragments drop the datagram (RFC 5722). What is
// given up is counted (Stats.ReassemblyDropped, ReasonFragmentLost).
//
// An error reading the file (it ends inside a record, a record longer than
// any packet, a broken pcapng block) stops the Reader with an error naming
// the file, the packet number and, for an uncompressed pcap, the byte
// offset of the record.
//
// # Into a journal
//
// An Importer journals the events of one or more captures. Each (source
// address and port, session) is a stream:
//
//   - a packet the incarnation rule every role applies (wire.StreamPos.Fit)
//     calls a restart (data or a heartbeat back at sequence 1, a heartbeat
//     going back, data more than wire.RestartDistance back), or data after
//     an end of session other than a late copy, starts a new incarnation
//     at once (a capture is trusted: a live subscriber waits for a second
//     packet to confirm), unless the packet is a byte-for-byte copy of the
//     one that began the current incarnation (a SPAN port or a second
//     tap): that is a duplicate;
//   - messages below the stream's next sequence are duplicates, skipped;
//   - a packet beyond the next sequence is held (up to Reorder packets
//     per stream, 64 by default, and ReorderBytes over all) in case the
//     missing ones arrive late, as they do in captures with reordering;
//   - a hole that the window, a heartbeat past it, an end of session, a
//     restart or the end of the import gives up is a gap, reported in
//     ImportStats.Gaps; the journal keeps every incarnation contiguous, so
//     under GapSplit (the default) what follows becomes a new incarnation
//     and under GapFail the import stops with ErrGap. A packet arriving
//     after its hole was given up is counted as late, not journaled;
//   - an end of session is journaled (Writer.End).
//
// What an import holds is bounded whatever the capture: at most MaxOpen
// journal writers are open (the least recently used is closed and resumed
// when its stream sends again), at most MaxStreams incarnations are created
// (each costs the journal a directory, fsyncs and an index held until it is
// closed; data beyond is refused and counted in ImportStats.RefusedStreams
// and Refused), and per capture stream the importer keeps a few words plus
// what it holds for reordering. Several captures are best imported in the
// order of their first packets (FirstTime); a message that still comes
// after its stream was split is counted in ImportStats.Late.
//
// Importing is idempotent: a capture stream first looks for an
// incarnation already holding its first sequence with the same message
// bytes (the oldest one not matched earlier in the same import, preferring
// one with the same timestamp), skips what that holds and appends the
// rest; a capture continuing where the newest incarnation stopped appends
// to it. So importing a capture twice adds nothing, and a capture split
// over several files, imported file by file, makes one incarnation.
//
// # Export
//
// Export writes a stream, or a range of it by sequence or time, through a
// Writer: a nanosecond pcap of Ethernet frames carrying IPv4 (or IPv6,
// when the group is IPv6) UDP datagrams with valid IPv4 header and UDP
// checksums, to a group (default 239.192.0.1:31001) from the stream's
// recorded source. Records are packed into MoldUDP64 packets up to the
// payload size (default 1472 over IPv4, 1452 over IPv6); records with the
// same timestamp share a packet, which is how a journal records the
// messages of one packet, so a captured feed that is imported and
// exported comes out packet for packet, byte for byte, with the same
// times. ExportConfig.Coalesce packs records further apart in time. An
// ended stream exported to its end gets its end-of-session packet,
// stamped with the last message's time (the journal keeps the end, not
// its time; heartbeats are not journaled at all). ExportStreams merges
// several streams into one capture in packet time order, as they were on
// the wire.
//
//	tshark -r FILE -d udp.port==PORT,moldudp64 \
//	    -T fields -e moldudp64.session -e moldudp64.sequence -e moldudp64.count
//
// # Live
//
// A Sender publishes captured packets verbatim (session and sequences
// preserved) to one group from a plain UDP socket, on lo with TTL 0 by
// default, paced by the capture times scaled by Speed and anchored to the
// first packet, so waiting errors never accumulate.
//
// # Concurrency
//
// Reader, Decoder, Importer, Writer and Sender are each for one goroutine
// at a time. Event.Packet and Datagram.Payload refer to the Reader's (or
// Decoder's) buffer and are valid until the next call.
//
// # Usage
//
//	r, err := pcap.NewReader(f, pcap.Config{Name: path, Ports: []uint16{26477}})
//	for {
//		ev, err := r.Next()
//		if err == io.EOF {
//			break
//		}
//		...
//		p, _ := wire.ParsePacket(ev.Packet) // valid: the Reader checked it
//	}
//	fmt.Println(r.Stats().Skipped)
package pcap
