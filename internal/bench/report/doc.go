// Package report turns benchmark results into what people read: the table
// printed at the end of a run, markdown comparisons of runs with
// significance tests, the layer table (what each layer adds to latency),
// sweep tables, and a self-contained HTML page of charts.
//
// Every report works on Runs: a label, whether the run counts, and named
// latency series. A kind of result (Kafka today) converts to Runs with one
// function (KafkaRun), so a new kind of benchmark gets every report by
// writing one more such function.
//
// It imports internal/bench/result and internal/bench/stats of ours.
package report
