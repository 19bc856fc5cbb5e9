package bench

import (
	"runtime"
	"sync"
)

// MaxProcs bounds Config.SubProcs, PubProcs and GroupConfig.Procs: the
// Go runtime allocates per processor and does not bound the count itself.
const MaxProcs = 1024

// The publisher's side of a run with subscriber processes runs on
// Config.PubProcs Go processors, as "mdbus pub" does; runs may overlap
// (tests), so the first to start sets the count and the last to end
// restores it.
var pubSide struct {
	sync.Mutex
	runs, prev int
}

// publisherSide gives this process Config.PubProcs Go processors when
// processes is true (the subscribers run elsewhere) and returns the
// function that restores them.
func (b *Bench) publisherSide(processes bool) func() {
	n := b.s.PubProcs
	if !processes || n <= 0 {
		return func() {}
	}
	pubSide.Lock()
	if pubSide.runs == 0 {
		pubSide.prev = runtime.GOMAXPROCS(n)
	}
	pubSide.runs++
	pubSide.Unlock()
	return func() {
		pubSide.Lock()
		defer pubSide.Unlock()
		if pubSide.runs--; pubSide.runs == 0 {
			runtime.GOMAXPROCS(pubSide.prev)
		}
	}
}

// useProcs gives a child process's body (ChildMain, GroupChildMain) the
// Go processors its spec names; n <= 0 leaves the runtime's default.
func useProcs(n int) {
	if n > 0 {
		runtime.GOMAXPROCS(n)
	}
}
