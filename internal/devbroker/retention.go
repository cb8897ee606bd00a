package devbroker

import (
	"strconv"
	"time"
)

// How RetentionBytes works, as found in kfake v0.0.0-20260918054303:
//
//   - A topic's retention.bytes falls back to the broker config
//     log.retention.bytes (data.go retentionBytes), so a broker-level default
//     covers auto-created topics, which kfake creates with no topic configs
//     at all, as well as seeded and explicitly created topics that do not set
//     their own. Size retention drops a partition's oldest batches until it
//     holds at most that many bytes.
//   - kfake's own retention ticker, every log.cleaner.backoff.ms, only runs
//     while some topic has retention.ms or retention.bytes set as a topic
//     config, or is compacted (cluster.go refreshCompactTicker). The broker
//     default alone never starts it, and an auto-created topic cannot be
//     given a topic config. So we also call ApplyRetention ourselves every
//     retentionInterval, and set log.cleaner.backoff.ms to the same interval
//     for the topics that do get kfake's ticker.
//
// When RetentionBytes is 0 both configs are reset, so that a value saved in
// DataDir by an earlier run with retention does not keep trimming this one.
func brokerConfigs(retentionBytes int64) map[string]string {
	if retentionBytes <= 0 {
		// An empty value deletes the config (back to kfake's default).
		return map[string]string{
			"log.retention.bytes":    "",
			"log.cleaner.backoff.ms": "",
		}
	}
	return map[string]string{
		"log.retention.bytes":    strconv.FormatInt(retentionBytes, 10),
		"log.cleaner.backoff.ms": strconv.FormatInt(retentionInterval.Milliseconds(), 10),
	}
}

func (c *Cluster) runRetention() {
	defer c.wg.Done()
	t := time.NewTicker(retentionInterval)
	defer t.Stop()
	for {
		select {
		case <-c.stop:
			return
		case <-t.C:
			c.kf.ApplyRetention()
		}
	}
}
