package replay

import "github.com/mdbus/mdbus/wire"

func uint64ToSeq(i int) wire.Seq { return wire.Seq(i) }
