// Package statsd is StatsD-style metric collection over the bus: a relay
// that takes the StatsD line protocol (etsy and DogStatsD) on UDP or a
// Unix datagram socket and publishes it as sequenced, recoverable MoldUDP64
// messages, a Go client that publishes onto the bus directly, and a
// collector that aggregates per flush interval and writes Graphite, JSON
// lines or Prometheus text.
//
// # Line protocol
//
//	name:value[:value...]|type[|@rate][|#tag,k:v...][|c:container][|Tunixseconds]
//
// Types: c (counter), g (gauge), ms (timer), h (histogram), d
// (distribution), s (set). A gauge value with a sign ("+3", "-3") is a
// delta, without one ("3") sets the gauge (etsy semantics: a negative
// gauge is set by "0|g" then "-3|g"). Lines are separated by '\n' (a
// '\r' before it is dropped); empty lines are skipped.
//
// Etsy multi-metric lines and DogStatsD value packing are told apart by
// where the ':' stands. DogStatsD 1.1 packs values in the value field,
// before the first '|': "name:1:2:3|d" is three values of one
// distribution. Etsy's server splits a line on every ':' and reads each
// part as "value|type[|@rate]", so "a:1|c:5|ms" is a counter and a timer
// of the same name. The type field never holds a ':', so a ':' after the
// type (or inside the sample-rate or timestamp field, the only fields
// etsy's form has) ends the metric and the next one of the same name
// starts after it. A ':' inside the tag field (#k:v) or container field
// (c:id) belongs to that field, which runs to the next '|'. Sets may pack
// members the same way ("s:a:b|s" is two members).
//
// A refused line, or one refused part of an etsy multi-metric line, is
// counted by Reason; nothing refused stops the relay or the collector.
// Limits bounds line length, name length, tag count, tag bytes and packed
// values, so no line costs more than a fixed amount of memory.
//
// The Parser allocates nothing: a Metric is reused and its byte slices
// point into the parsed datagram.
package statsd
