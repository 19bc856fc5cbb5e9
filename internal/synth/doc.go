// Package synth generates synthetic market data: NASDAQ TotalView-ITCH 5.0
// shaped order-book messages (add, execute, cancel, delete, replace, trade)
// with their real sizes and field layouts, from a seed, so that demos,
// tests and benchmarks carry realistic payloads without a capture.
//
// Message sizes (bytes, including the type byte), as in the ITCH 5.0
// specification:
//
//	'A' Add Order            36     'D' Order Delete     19
//	'E' Order Executed       31     'U' Order Replace    35
//	'X' Order Cancel         23     'P' Trade            44
//
// The mix approximates a real feed: adds and deletes dominate.
//
// A Generator is not safe for concurrent use. Next appends to a
// caller-owned buffer and does not allocate.
package synth
