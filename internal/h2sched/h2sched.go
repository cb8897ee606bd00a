// Package h2sched chooses the HTTP/2 write scheduler of Strait's HTTP
// servers (the LLM gateway and the mock provider): one whose cost per
// frame does not grow with the number of streams open on a connection.
//
// net/http's HTTP/2 server keeps every open stream in a ring and, for each
// frame it writes, walks the ring until it finds a stream with something
// queued (x/net's default RFC 9218 scheduler walks its rings the same
// way). A gateway holds thousands of streams open per client connection
// while providers think, nearly all with nothing to send: with 1,500
// streams per connection that walk was a tenth of the gateway's CPU, and
// it grows with the requests in flight. x/net's random scheduler keeps only
// the streams that have frames queued, so a frame costs the same whatever
// waits beside it. It ignores priorities, which neither LLM clients nor
// the gateway's streams use: control frames go first, and streams with
// data take turns in no particular order, each stream's frames in order.
package h2sched

import "golang.org/x/net/http2"

// New returns a write scheduler for one HTTP/2 connection, for
// http2.Server.NewWriteScheduler.
func New() http2.WriteScheduler { return http2.NewRandomWriteScheduler() }
