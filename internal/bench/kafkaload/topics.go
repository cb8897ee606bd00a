package kafkaload

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// ensureTopics creates the topics that do not exist (with the broker's
// default replication factor) and waits until every partition has a
// leader. It returns each topic's partition count as the cluster has it.
func ensureTopics(ctx context.Context, cl *kgo.Client, names []string, partitions int) (map[string]int, error) {
	have, err := describe(ctx, cl, names)
	if err != nil {
		return nil, err
	}
	create := kmsg.NewPtrCreateTopicsRequest()
	create.TimeoutMillis = 30000
	for _, n := range names {
		if _, ok := have[n]; ok {
			continue
		}
		t := kmsg.NewCreateTopicsRequestTopic()
		t.Topic = n
		t.NumPartitions = int32(partitions)
		t.ReplicationFactor = -1
		create.Topics = append(create.Topics, t)
	}
	if len(create.Topics) > 0 {
		resp, err := create.RequestWith(ctx, cl)
		if err != nil {
			return nil, fmt.Errorf("creating topics: %w", err)
		}
		for _, t := range resp.Topics {
			if err := kerr.ErrorForCode(t.ErrorCode); err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
				msg := ""
				if t.ErrorMessage != nil {
					msg = ": " + *t.ErrorMessage
				}
				return nil, fmt.Errorf("cannot create topic %q: %v%s", t.Topic, err, msg)
			}
		}
	}
	// Leaders appear shortly after creation; wait a bounded time.
	deadline := time.Now().Add(15 * time.Second)
	for {
		have, err = describe(ctx, cl, names)
		if err != nil {
			return nil, err
		}
		missing := ""
		for _, n := range names {
			if have[n] == 0 {
				missing = n
				break
			}
		}
		if missing == "" {
			return have, nil
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("topic %q has no partitions with a leader 15s after creation", missing)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// describe returns the number of led partitions of each existing topic
// (a topic whose partitions have no leader yet counts 0).
func describe(ctx context.Context, cl *kgo.Client, names []string) (map[string]int, error) {
	req := kmsg.NewPtrMetadataRequest()
	for _, n := range names {
		t := kmsg.NewMetadataRequestTopic()
		t.Topic = kmsg.StringPtr(n)
		req.Topics = append(req.Topics, t)
	}
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return nil, err
	}
	out := make(map[string]int)
	for _, t := range resp.Topics {
		if t.Topic == nil {
			continue
		}
		switch err := kerr.ErrorForCode(t.ErrorCode); {
		case err == nil:
		case errors.Is(err, kerr.UnknownTopicOrPartition), errors.Is(err, kerr.LeaderNotAvailable):
			continue
		default:
			return nil, fmt.Errorf("topic %q: %w", *t.Topic, err)
		}
		led := 0
		for _, p := range t.Partitions {
			if p.ErrorCode == 0 && p.Leader >= 0 {
				led++
			}
		}
		if led == len(t.Partitions) {
			out[*t.Topic] = led
		} else {
			out[*t.Topic] = 0
		}
	}
	return out, nil
}

// endOffsets returns the current end offset of every partition of the
// topics, so the run's consumers start exactly where its records begin.
func endOffsets(ctx context.Context, cl *kgo.Client, parts map[string]int) (map[string]map[int32]int64, error) {
	req := kmsg.NewPtrListOffsetsRequest()
	req.ReplicaID = -1
	for name, n := range parts {
		t := kmsg.NewListOffsetsRequestTopic()
		t.Topic = name
		for p := range n {
			rp := kmsg.NewListOffsetsRequestTopicPartition()
			rp.Partition = int32(p)
			rp.Timestamp = -1 // latest
			rp.CurrentLeaderEpoch = -1
			t.Partitions = append(t.Partitions, rp)
		}
		req.Topics = append(req.Topics, t)
	}
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return nil, fmt.Errorf("listing end offsets: %w", err)
	}
	out := make(map[string]map[int32]int64)
	for _, t := range resp.Topics {
		m := make(map[int32]int64)
		for _, p := range t.Partitions {
			if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
				return nil, fmt.Errorf("end offset of %s[%d]: %w", t.Topic, p.Partition, err)
			}
			m[p.Partition] = p.Offset
		}
		out[t.Topic] = m
	}
	return out, nil
}
