package encryption

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/straitgw/strait/internal/kms/awskms/localkms"
	"github.com/straitgw/strait/internal/kms/kmsconfig"
)

// BenchmarkAWSKMSCallsPerMinute counts the calls that reach AWS KMS (a
// local KMS server) in one minute of steady load: 5,000 records/s over 50
// topics, each under its own KEK (alias/{topic}-kek), produced through one
// gateway and consumed through another (a second instance, with a KMS
// cache of its own). It reports the calls made in the minute after a 15 s
// warm-up, per operation, for the default dek.max_age (1h) and for 1m.
//
//	go test ./internal/kafka/filters/encryption -run '^$' -bench AWSKMSCallsPerMinute -benchtime 1x
func BenchmarkAWSKMSCallsPerMinute(b *testing.B) {
	for _, maxAge := range []time.Duration{DefaultMaxAge, time.Minute} {
		b.Run(fmt.Sprintf("dek.max_age=%s", maxAge), func(b *testing.B) {
			for range b.N {
				kmsCallsUnderLoad(b, maxAge, 50, 5000, 15*time.Second, time.Minute)
			}
		})
	}
}

func kmsCallsUnderLoad(b *testing.B, maxAge time.Duration, nTopics int, rate float64, warmup, measure time.Duration) {
	s := localkms.Start(b)
	b.Setenv("AWS_ACCESS_KEY_ID", localkms.AccessKey)
	b.Setenv("AWS_SECRET_ACCESS_KEY", localkms.SecretKey)
	b.Setenv("AWS_REGION", localkms.Region)
	b.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	topics := make([]string, nTopics)
	for i := range topics {
		topics[i] = fmt.Sprintf("secure-load-%02d", i)
		s.CreateKEK("alias/" + topics[i] + "-kek")
	}
	broker := startBroker(b, topics...)
	block := kmsconfig.Config{Backend: kmsconfig.Backend{Type: "aws", Endpoint: s.Endpoint}}
	cfg := Config{Topics: []string{"secure-*"}, KEK: "alias/{topic}-kek", DEK: DEKConfig{MaxAge: maxAge}}
	open := func() *Filter {
		k, err := kmsconfig.Open(block)
		if err != nil {
			b.Fatal(err)
		}
		f, err := New(cfg, k)
		if err != nil {
			b.Fatal(err)
		}
		return f
	}
	prodGW, stopProd := startGateway(b, broker, open())
	consGW, stopCons := startGateway(b, broker, open())
	defer stopProd()
	defer stopCons()

	prod, err := kgo.NewClient(kgo.SeedBrokers(prodGW), kgo.ProducerLinger(5*time.Millisecond))
	if err != nil {
		b.Fatal(err)
	}
	defer prod.Close()
	cons, err := kgo.NewClient(kgo.SeedBrokers(consGW), kgo.ConsumeTopics(topics...))
	if err != nil {
		b.Fatal(err)
	}
	defer cons.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var consumed, failed atomic.Int64
	go func() {
		for ctx.Err() == nil {
			fs := cons.PollFetches(ctx)
			fs.EachError(func(string, int32, error) { failed.Add(1) })
			consumed.Add(int64(len(fs.Records())))
		}
	}()

	value := make([]byte, 1024)
	var produced atomic.Int64
	tick := 10 * time.Millisecond
	perTick := int(rate * tick.Seconds())
	type snap struct{ wrap, unwrap, unavailable float64 }
	read := func() snap {
		return snap{awsCalls("wrap", "ok"), awsCalls("unwrap", "ok"), awsCalls("wrap", "unavailable") + awsCalls("unwrap", "unavailable")}
	}
	base := read()
	var before snap
	warm := false
	start := time.Now()
	next := 0
	for tk := time.NewTicker(tick); ; <-tk.C {
		el := time.Since(start)
		if !warm && el >= warmup {
			before, warm = read(), true
		}
		if el >= warmup+measure {
			tk.Stop()
			break
		}
		for range perTick {
			r := &kgo.Record{Topic: topics[next%nTopics], Value: value}
			next++
			prod.Produce(ctx, r, func(_ *kgo.Record, err error) {
				if err != nil {
					failed.Add(1)
				} else {
					produced.Add(1)
				}
			})
		}
	}
	after := read()
	minutes := measure.Minutes()
	b.ReportMetric((after.wrap-before.wrap)/minutes, "Encrypt/min")
	b.ReportMetric((after.unwrap-before.unwrap)/minutes, "Decrypt/min")
	b.ReportMetric(before.wrap-base.wrap, "Encrypt-in-warmup")
	b.ReportMetric(before.unwrap-base.unwrap, "Decrypt-in-warmup")
	b.ReportMetric(float64(produced.Load())/(warmup+measure).Seconds(), "produced/s")
	b.ReportMetric(float64(consumed.Load())/(warmup+measure).Seconds(), "consumed/s")
	if failed.Load() > 0 || after.unavailable > base.unavailable {
		b.Errorf("%d produce or fetch errors, %v unavailable KMS calls", failed.Load(), after.unavailable-base.unavailable)
	}
}
