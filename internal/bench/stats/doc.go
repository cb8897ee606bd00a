// Package stats is the measurement core of the benchmark harness: it
// records latencies into HdrHistograms, keeps one p99 sample per
// measurement window, paces open-loop load, and tells whether two runs
// differ by more than chance (the Mann-Whitney U test).
//
// Latencies are measured from when a request was meant to be sent, not from
// when it was sent (see Schedule): a load generator that waits for a stalled
// system before sending its next request, and measures from then, reports
// the stall as one slow request instead of the hundreds it delayed — the
// "coordinated omission" that makes tail latencies look far better than
// any user sees them.
//
// It imports only internal/bench/result of ours, whose types it fills.
package stats
