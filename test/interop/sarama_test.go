package interop

import (
	"context"
	"crypto/tls"
	"sync"
	"testing"
	"time"

	"github.com/IBM/sarama"
)

var saramaCodecs = []struct {
	name  string
	codec sarama.CompressionCodec
}{
	{"none", sarama.CompressionNone},
	{"gzip", sarama.CompressionGZIP},
	{"snappy", sarama.CompressionSnappy},
	{"lz4", sarama.CompressionLZ4},
	{"zstd", sarama.CompressionZSTD},
}

// saramaVersions are the Kafka versions sarama is told it talks to; sarama
// picks its request versions from this rather than from ApiVersions, so
// three protocol generations go through the gateway: 1.0 (Produce v5,
// Fetch v6, no flexible versions), 2.8 and 4.0 (flexible versions).
var saramaVersions = []struct {
	name    string
	version sarama.KafkaVersion
}{
	{"v1.0", sarama.V1_0_0_0},
	{"v2.8", sarama.V2_8_0_0},
	{"v4.0", sarama.V4_0_0_0},
}

// TestSarama round-trips records with IBM/sarama: a sync producer per codec
// and a consumer group, per protocol generation. The subtests share one
// gateway and run in parallel.
func TestSarama(t *testing.T) {
	t.Parallel()
	e := startEnv(t)
	for _, v := range saramaVersions {
		for _, c := range saramaCodecs {
			if c.codec == sarama.CompressionZSTD && !v.version.IsAtLeast(sarama.V2_1_0_0) {
				continue // zstd needs Produce v7 (Kafka 2.1)
			}
			t.Run(v.name+"/"+c.name, func(t *testing.T) {
				t.Parallel()
				saramaRoundTrip(t, e, v.version, c.codec, 300, nil)
			})
		}
	}
}

func saramaConfig(version sarama.KafkaVersion, tlsCfg *tls.Config) *sarama.Config {
	cfg := sarama.NewConfig()
	cfg.ClientID = "strait-interop-sarama"
	cfg.Version = version
	if tlsCfg != nil {
		cfg.Net.TLS.Enable = true
		cfg.Net.TLS.Config = tlsCfg
	}
	return cfg
}

func saramaRoundTrip(t *testing.T, e *env, version sarama.KafkaVersion, codec sarama.CompressionCodec, n int, tlsCfg *tls.Config) {
	t.Helper()
	topic := topicName(t, "t")
	recs := makeRecords(recordSpec{prefix: topic, n: n, headers: true})

	pcfg := saramaConfig(version, tlsCfg)
	pcfg.Producer.Compression = codec
	pcfg.Producer.RequiredAcks = sarama.WaitForAll
	pcfg.Producer.Return.Successes = true
	pcfg.Producer.Partitioner = sarama.NewHashPartitioner
	prod, err := sarama.NewSyncProducer([]string{e.addr}, pcfg)
	if err != nil {
		t.Fatal(err)
	}
	// Send in batches so the producer builds multi-record, compressed
	// record batches.
	for start := 0; start < n; start += 50 {
		var msgs []*sarama.ProducerMessage
		for _, r := range recs[start:min(start+50, n)] {
			m := &sarama.ProducerMessage{Topic: topic, Key: sarama.ByteEncoder(r.Key), Value: sarama.ByteEncoder(r.Value)}
			for _, h := range r.Headers {
				m.Headers = append(m.Headers, sarama.RecordHeader{Key: []byte(h.Key), Value: h.Value})
			}
			msgs = append(msgs, m)
		}
		if err := prod.SendMessages(msgs); err != nil {
			prod.Close()
			t.Fatalf("produce: %v", err)
		}
	}
	if err := prod.Close(); err != nil {
		t.Fatal(err)
	}

	ccfg := saramaConfig(version, tlsCfg)
	ccfg.Consumer.Offsets.Initial = sarama.OffsetOldest
	ccfg.Consumer.Offsets.AutoCommit.Enable = false
	ccfg.Consumer.Return.Errors = true
	group, err := sarama.NewConsumerGroup([]string{e.addr}, topic+"-g", ccfg)
	if err != nil {
		t.Fatal(err)
	}
	defer group.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	h := &saramaHandler{want: n, done: cancel}
	errDone := make(chan struct{})
	go func() {
		defer close(errDone)
		for err := range group.Errors() {
			t.Errorf("consumer group: %v", err)
		}
	}()
	for ctx.Err() == nil {
		if err := group.Consume(ctx, []string{topic}, h); err != nil && ctx.Err() == nil {
			t.Fatalf("consume: %v", err)
		}
	}
	if err := group.Close(); err != nil {
		t.Errorf("close group: %v", err)
	}
	<-errDone
	got := h.records()
	if len(got) < n {
		t.Errorf("consumed %d of %d records before the deadline", len(got), n)
	}
	verify(t, recs, got, checkOpts{headers: true, partitions: numPartitions})
	checkStored(t, e, topic, recs, checkOpts{headers: true, partitions: numPartitions}, codecName(uint8(codec)))
}

// saramaHandler collects records until it has want of them.
type saramaHandler struct {
	want int
	done func()
	mu   sync.Mutex
	got  []record
}

func (*saramaHandler) Setup(sarama.ConsumerGroupSession) error   { return nil }
func (*saramaHandler) Cleanup(sarama.ConsumerGroupSession) error { return nil }

func (h *saramaHandler) ConsumeClaim(s sarama.ConsumerGroupSession, c sarama.ConsumerGroupClaim) error {
	for m := range c.Messages() {
		r := record{Key: m.Key, Value: m.Value, Partition: m.Partition, Offset: m.Offset}
		for _, rh := range m.Headers {
			r.Headers = append(r.Headers, header{Key: string(rh.Key), Value: rh.Value})
		}
		s.MarkMessage(m, "")
		h.mu.Lock()
		h.got = append(h.got, r)
		if len(h.got) == h.want {
			s.Commit()
			h.done()
		}
		h.mu.Unlock()
	}
	return nil
}

func (h *saramaHandler) records() []record {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]record(nil), h.got...)
}
