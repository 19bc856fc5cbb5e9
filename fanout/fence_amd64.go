package fanout

// loadFence orders the plain loads of a copied batch before the atomic load
// of the writer's intent that validates it. On amd64 (TSO) loads are not
// reordered with other loads, so it is empty.
func loadFence(*uint64) {}
