//go:build !amd64

package fanout

import "sync/atomic"

// loadFence orders the plain loads of a copied batch before the atomic load
// of the writer's intent that validates it. Go has no standalone fence; an
// atomic read-modify-write on a word of the reader's own is a full barrier
// on the weakly ordered architectures Go supports (arm64 LDADDAL or an
// LDAXR/STLXR pair with DMB). It runs once per batch, not per message.
func loadFence(w *uint64) { atomic.AddUint64(w, 1) }
