package result

import "fmt"

// SplitByAPI splits the CPU per request of mixed, a run with producers and
// consumers, between Produce and Fetch, with produceOnly, a run of the same
// workload without consumers through the same processes. A process's CPU
// time cannot be split by API within one run, so the split takes two:
//
//	µs per Produce = produce-only CPU / produce-only Produce requests
//	µs per Fetch   = (mixed CPU − mixed Produce requests × µs per Produce) / mixed Fetch requests
//
// The second is derived: it assumes a Produce costs in the mixed run what
// it cost alone, and it carries the mixed run's few other requests
// (Metadata, heartbeats). The notes it adds to mixed.SplitNotes say so,
// and give each run's records per Produce, since a Produce of more records
// costs more. It keeps produceOnly in mixed.ProduceOnly and fills
// CPUMicrosPerProduce and CPUMicrosPerFetch of each process of mixed that
// produceOnly watched too (matched by PID).
func SplitByAPI(mixed, produceOnly *Kafka) {
	mixed.ProduceOnly = produceOnly
	// Both runs' counts must come from the same counter.
	countM, countP, by := mixed.GatewayRequests, produceOnly.GatewayRequests, CountedByGateway
	if countM == nil || countP == nil {
		countM, countP, by = mixed.ClientRequests, produceOnly.ClientRequests, CountedByClient
	}
	produces, fetches, alone := countM.API(APIProduce), countM.API(APIFetch), countP.API(APIProduce)
	if produces == 0 || fetches == 0 || alone == 0 {
		mixed.SplitNotes = append(mixed.SplitNotes, fmt.Sprintf(
			"no split by API: it needs Produce requests in both runs and Fetch requests in the mixed one (counted by the %s: mixed %d Produce, %d Fetch; produce-only %d Produce)",
			by, produces, fetches, alone))
		return
	}
	mixed.SplitNotes = append(mixed.SplitNotes, fmt.Sprintf(
		"µs per Produce is measured in a produce-only run, µs per Fetch derived: the mixed run's CPU less its %d Produce requests at the produce-only cost, over its %d Fetch requests (requests counted by the %s; the mixed run's %d other requests count as Fetch)",
		produces, fetches, by, countM.Total-produces-fetches))
	mixed.SplitNotes = append(mixed.SplitNotes, fmt.Sprintf(
		"Produce requests: %s/s of %.1f records each in the produce-only run, %s/s of %.1f in the mixed one (the split assumes a Produce costs the same in both; a busier process pays less per request, a larger Produce more)",
		rate(alone, produceOnly.DurationS), recordsPer(produceOnly, alone), rate(produces, mixed.DurationS), recordsPer(mixed, produces)))
	for i := range mixed.Processes {
		p := &mixed.Processes[i]
		var q *Process
		for j := range produceOnly.Processes {
			if produceOnly.Processes[j].PID == p.PID {
				q = &produceOnly.Processes[j]
			}
		}
		if q == nil {
			mixed.SplitNotes = append(mixed.SplitNotes, fmt.Sprintf("%s (pid %d): not watched in the produce-only run, so not split", p.Name, p.PID))
			continue
		}
		perProduce := q.CPUSeconds * 1e6 / float64(alone)
		perFetch := (p.CPUSeconds*1e6 - float64(produces)*perProduce) / float64(fetches)
		p.CPUMicrosPerProduce = perProduce
		if perFetch <= 0 {
			mixed.SplitNotes = append(mixed.SplitNotes, fmt.Sprintf(
				"%s (pid %d): no µs per Fetch: the mixed run's CPU (%.3f s) is less than its Produce requests at the produce-only cost (%.3f s), so the two runs' Produce costs differ more than Fetch costs",
				p.Name, p.PID, p.CPUSeconds, float64(produces)*perProduce/1e6))
			continue
		}
		p.CPUMicrosPerFetch = perFetch
	}
}

// recordsPer is the records k's producers had acknowledged during its
// measurement per Produce request.
func recordsPer(k *Kafka, produces int64) float64 {
	return k.PublishRate * k.DurationS / float64(produces)
}

// rate is n per second over durationS seconds, rounded.
func rate(n int64, durationS float64) string {
	if durationS <= 0 {
		return "?"
	}
	return fmt.Sprintf("%.0f", float64(n)/durationS)
}
