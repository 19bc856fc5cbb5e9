package wire_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mdbus/mdbus/wire"
)

// TestCaptureFilesIntact pins the third-party files to the hashes recorded in
// testdata/README.md, so a test never silently runs against altered data.
func TestCaptureFilesIntact(t *testing.T) {
	for path, want := range map[string]string{
		capturePcap: "9f23a9df89887e28a3b3b1206d00c029d7e71ca798bcf9e59447f1abe8229cf3",
		captureBin:  "0e8d725655f798e4e526ddb1712ead9c0c9f289ed686bd08f56f41ab07a0bc88",
	} {
		b, err := os.ReadFile(path)
		require.NoError(t, err)
		sum := sha256.Sum256(b)
		require.Equal(t, want, hex.EncodeToString(sum[:]), path)
	}
}

// TestCaptureConformance decodes two real NASDAQ TotalView-ITCH 5.0
// MoldUDP64 packets and re-encodes them with the Encoder, byte for byte.
// tshark's MoldUDP64 dissector reads the same capture as
// "000010059B 14764496 1" and "000010059B 19009117 38".
func TestCaptureConformance(t *testing.T) {
	dgrams := readPcapUDP(t, capturePcap)
	require.Len(t, dgrams, 2)
	want := []struct {
		seq   wire.Seq
		count uint16
		size  int
	}{
		{seq: 14764496, count: 1, size: 41},
		{seq: 19009117, count: 38, size: wire.DefaultPayloadSizeIPv4},
	}
	session := mustSession(t, "000010059B")
	for i, d := range dgrams {
		require.Equal(t, uint16(26477), d.dstPort)
		require.Len(t, d.payload, want[i].size)

		p, err := wire.ParsePacket(d.payload)
		require.NoError(t, err, "packet %d", i)
		require.Equal(t, session, p.Session)
		require.Equal(t, "000010059B", p.Session.String())
		require.Equal(t, want[i].seq, p.Seq)
		require.Equal(t, want[i].count, p.Count)
		require.Equal(t, len(d.payload), p.Len())

		msgs := collect(t, p)
		require.Len(t, msgs, int(p.Count))
		var enc wire.Encoder
		enc.Reset(make([]byte, 0, wire.DefaultPayloadSizeIPv4), p.Session, p.Seq, wire.DefaultPayloadSizeIPv4)
		for j, m := range msgs {
			// Every message is an ITCH 5.0 message: a known type letter
			// first, and no longer than the largest ITCH message (50 bytes).
			require.NotEmpty(t, m, "message %d", j)
			require.LessOrEqual(t, len(m), 50, "message %d", j)
			require.Contains(t, "SRHYLVWKJhAFECXDUPQBIN", string(m[0]), "message %d type", j)
			require.NoError(t, enc.Add(m), "message %d", j)
		}
		require.Equal(t, d.payload, enc.Bytes(), "re-encoding packet %d", i)
		require.Equal(t, len(d.payload), enc.Len())
		if enc.Len() == wire.DefaultPayloadSizeIPv4 {
			// The second packet fills a 1500-byte Ethernet frame exactly:
			// the Encoder takes no further message, not even an empty one.
			require.ErrorIs(t, enc.Add(nil), wire.ErrPacketFull)
			require.Equal(t, d.payload, enc.Bytes(), "a refused Add changes nothing")
		}
	}
}

// TestCaptureMessageBlocks packs the first 1000 messages of NASDAQ's public
// ITCH 5.0 sample into packets of DefaultPayloadSizeIPv4, all back to back in
// one buffer, then parses them and compares every message and sequence.
func TestCaptureMessageBlocks(t *testing.T) {
	raw, err := os.ReadFile(captureBin)
	require.NoError(t, err)
	msgs := readBlocks(t, captureBin)
	require.Len(t, msgs, 1000)

	session := mustSession(t, "20191230")
	const first wire.Seq = 1
	var (
		enc    wire.Encoder
		buf    []byte
		starts []int // offset of each packet in buf
	)
	start := func(seq wire.Seq) {
		starts = append(starts, len(buf))
		enc.Reset(buf, session, seq, wire.DefaultPayloadSizeIPv4)
	}
	start(first)
	for i, m := range msgs {
		err := enc.Add(m)
		if errors.Is(err, wire.ErrPacketFull) {
			buf = enc.Bytes()
			start(first + wire.Seq(i))
			err = enc.Add(m)
		}
		require.NoError(t, err, "message %d", i)
	}
	buf = enc.Bytes()
	starts = append(starts, len(buf))
	require.Greater(t, len(starts)-1, 20, "35,570 bytes need more than 20 packets")

	next := first
	var bodies []byte
	for k := range len(starts) - 1 {
		pkt := buf[starts[k]:starts[k+1]]
		require.LessOrEqual(t, len(pkt), wire.DefaultPayloadSizeIPv4, "packet %d", k)
		p, err := wire.ParsePacket(pkt)
		require.NoError(t, err, "packet %d", k)
		require.Equal(t, session, p.Session)
		require.Equal(t, next, p.Seq, "packet %d", k)
		require.NotZero(t, p.Count, "packet %d", k)
		it := p.Messages()
		for {
			m, seq, ok := it.Next()
			if !ok {
				break
			}
			require.Equal(t, next, seq)
			require.True(t, bytes.Equal(msgs[seq-first], m), "message %d", seq)
			next++
		}
		require.Equal(t, p.Next(), next)
		// Packing is greedy: the first message of the next packet would
		// not have fitted in this one.
		if k+1 < len(starts)-1 {
			require.Greater(t, len(pkt)+wire.MsgLenLen+len(msgs[next-first]), wire.DefaultPayloadSizeIPv4,
				"packet %d was closed early", k)
		}
		bodies = append(bodies, p.Body()...)
	}
	require.Equal(t, first+1000, next)
	// The bodies of the packets, concatenated, are the message-block file.
	require.True(t, bytes.Equal(raw, bodies), "packet bodies differ from the message-block file")
}
