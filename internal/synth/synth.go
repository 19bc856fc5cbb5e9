package synth

import (
	"encoding/binary"
	"math/rand/v2"
)

// Message types and sizes of ITCH 5.0.
const (
	AddOrder      = 'A'
	OrderExecuted = 'E'
	OrderCancel   = 'X'
	OrderDelete   = 'D'
	OrderReplace  = 'U'
	Trade         = 'P'
)

// Size returns the ITCH 5.0 size of a message type, or 0 if unknown.
func Size(typ byte) int {
	switch typ {
	case AddOrder:
		return 36
	case OrderExecuted:
		return 31
	case OrderCancel:
		return 23
	case OrderDelete:
		return 19
	case OrderReplace:
		return 35
	case Trade:
		return 44
	}
	return 0
}

// mix is the cumulative share, in per mille, of each type.
var mix = [...]struct {
	typ  byte
	upto int
}{
	{AddOrder, 420}, {OrderDelete, 780}, {OrderReplace, 870},
	{OrderExecuted, 930}, {OrderCancel, 970}, {Trade, 1000},
}

var stocks = [...][8]byte{
	[8]byte([]byte("AAPL    ")), [8]byte([]byte("MSFT    ")), [8]byte([]byte("NVDA    ")),
	[8]byte([]byte("AMZN    ")), [8]byte([]byte("GOOGL   ")), [8]byte([]byte("META    ")),
	[8]byte([]byte("TSLA    ")), [8]byte([]byte("AVGO    ")),
}

// Generator produces a deterministic stream of messages from a seed.
type Generator struct {
	rng   *rand.Rand
	ref   uint64 // last order reference number
	clock uint64 // nanoseconds since midnight
	track uint16
}

// New returns a generator seeded with seed.
func New(seed uint64) *Generator {
	return &Generator{rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)), clock: 34200e9} // 09:30
}

// Next appends the next message to dst and returns it.
func (g *Generator) Next(dst []byte) []byte {
	r := g.rng.IntN(1000)
	typ := byte(Trade)
	for _, m := range mix {
		if r < m.upto {
			typ = m.typ
			break
		}
	}
	if g.ref == 0 && typ != AddOrder {
		typ = AddOrder
	}
	g.clock += uint64(g.rng.IntN(20000))
	g.track++
	stock := uint16(g.rng.IntN(len(stocks)))
	dst = append(dst, typ)
	dst = binary.BigEndian.AppendUint16(dst, stock+1)
	dst = binary.BigEndian.AppendUint16(dst, g.track)
	dst = append(dst, byte(g.clock>>40), byte(g.clock>>32), byte(g.clock>>24), byte(g.clock>>16), byte(g.clock>>8), byte(g.clock))
	price := uint32(1000000 + g.rng.IntN(5000000)) // 4 implied decimals
	shares := uint32(100 * (1 + g.rng.IntN(20)))
	switch typ {
	case AddOrder:
		g.ref++
		dst = binary.BigEndian.AppendUint64(dst, g.ref)
		dst = append(dst, "BS"[g.rng.IntN(2)])
		dst = binary.BigEndian.AppendUint32(dst, shares)
		dst = append(dst, stocks[stock][:]...)
		dst = binary.BigEndian.AppendUint32(dst, price)
	case OrderExecuted:
		dst = binary.BigEndian.AppendUint64(dst, g.someRef())
		dst = binary.BigEndian.AppendUint32(dst, shares)
		dst = binary.BigEndian.AppendUint64(dst, uint64(g.track)) // match number
	case OrderCancel:
		dst = binary.BigEndian.AppendUint64(dst, g.someRef())
		dst = binary.BigEndian.AppendUint32(dst, shares)
	case OrderDelete:
		dst = binary.BigEndian.AppendUint64(dst, g.someRef())
	case OrderReplace:
		dst = binary.BigEndian.AppendUint64(dst, g.someRef())
		g.ref++
		dst = binary.BigEndian.AppendUint64(dst, g.ref)
		dst = binary.BigEndian.AppendUint32(dst, shares)
		dst = binary.BigEndian.AppendUint32(dst, price)
	case Trade:
		dst = binary.BigEndian.AppendUint64(dst, 0)
		dst = append(dst, 'B')
		dst = binary.BigEndian.AppendUint32(dst, shares)
		dst = append(dst, stocks[stock][:]...)
		dst = binary.BigEndian.AppendUint32(dst, price)
		dst = binary.BigEndian.AppendUint64(dst, uint64(g.track))
	}
	return dst
}

func (g *Generator) someRef() uint64 { return 1 + g.rng.Uint64N(g.ref) }

// RandomSizes fills messages of random length in [min, max] with seeded
// bytes: the acceptance tests' "random sizes" stream.
type RandomSizes struct {
	rng      *rand.Rand
	min, max int
}

// NewRandomSizes returns a generator of messages of min to max bytes.
func NewRandomSizes(seed uint64, min, max int) *RandomSizes {
	return &RandomSizes{rng: rand.New(rand.NewPCG(seed, ^seed)), min: min, max: max}
}

// Next appends the next message to dst and returns it.
func (r *RandomSizes) Next(dst []byte) []byte {
	n := r.min + r.rng.IntN(r.max-r.min+1)
	for n >= 8 {
		dst = binary.LittleEndian.AppendUint64(dst, r.rng.Uint64())
		n -= 8
	}
	for ; n > 0; n-- {
		dst = append(dst, byte(r.rng.Uint32()))
	}
	return dst
}
