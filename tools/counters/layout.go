package counters

import (
	"encoding/binary"
	"sync/atomic"
	"unsafe"
)

// Layout of a counters file. Part of the file format that other processes
// read (mdbus stat, Prometheus handlers, third-party readers); do not
// change. A new layout gets a new Version.
const (
	Magic   = "MDBUSCTR"
	Version = 1

	// HeaderSize is the size of the file header: one page.
	HeaderSize = 4096
	// SlotSize is the size of one counter slot: the value alone on the
	// first cache line, the description on the next three.
	SlotSize = 256
	// MaxSlots bounds the slot count a reader accepts (16 MiB of slots).
	MaxSlots = 65536
	// DefaultSlots is the slot count of a file when Config.Slots is 0.
	DefaultSlots = 1024

	offMagic          = 0  // [8]byte
	offVersion        = 8  // uint32
	offHeaderSize     = 12 // uint32
	offSlotSize       = 16 // uint32
	offNumSlots       = 20 // uint32
	offPID            = 24 // uint64
	offStartTicks     = 32 // uint64: /proc/PID/stat field 22
	offCreated        = 40 // int64: Unix ns
	offEpoch          = 48 // uint64, atomic: odd while a sampling pass writes
	offSampled        = 56 // int64, atomic: Unix ns of the last pass
	offSlotsExhausted = 64 // uint64, atomic: counters refused for want of a slot
	offInterval       = 72 // int64: sampling interval, ns
	offRole           = 128
	RoleLen           = 32
	offCmdline        = 160
	CmdlineLen        = HeaderSize - offCmdline

	slotValue    = 0  // int64, atomic
	slotSeq      = 64 // uint64, atomic: 0 never used, odd while the description changes
	slotKind     = 72 // uint32
	slotType     = 76 // uint8
	slotLabelLen = 77 // uint8
	slotOwnerLen = 78 // uint8
	slotLabel    = 80
	LabelLen     = 48
	slotOwner    = slotLabel + LabelLen // 128
	OwnerLen     = SlotSize - slotOwner // 128
)

// Type says how a value behaves.
type Type uint8

// Types. Part of the file format.
const (
	// Free marks an unused slot.
	Free Type = 0
	// Counter only grows (until its owner restarts).
	Counter Type = 1
	// Gauge goes up and down.
	Gauge Type = 2
)

func (t Type) String() string {
	switch t {
	case Counter:
		return "counter"
	case Gauge:
		return "gauge"
	}
	return "free"
}

// le is the byte order of every field.
var le = binary.LittleEndian

// word returns the 64-bit word at off of mem as an atomic. mem comes from
// mmap (page aligned) or from alignedBytes, and off is a multiple of 8.
func word(mem []byte, off int) *atomic.Uint64 {
	return (*atomic.Uint64)(unsafe.Pointer(&mem[off]))
}

// load reads the 64-bit word at off atomically where it is aligned (always,
// for mapped files), and plainly otherwise.
func load(mem []byte, off int) uint64 {
	if uintptr(unsafe.Pointer(&mem[off]))%8 == 0 {
		return word(mem, off).Load()
	}
	return le.Uint64(mem[off:])
}

// alignedBytes returns n zero bytes whose start is 8-byte aligned.
func alignedBytes(n int) []byte {
	w := make([]uint64, (n+7)/8)
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(w))), n)[:n:n]
}
