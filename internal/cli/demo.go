package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/straitgw/strait/internal/devbroker"
	"github.com/straitgw/strait/internal/telemetry"
)

// demoConfig is the embedded default: one virtual cluster in front of the
// in-process development cluster.
const demoConfig = `# The config 'strait demo' runs. Edit a copy and run it with 'strait run -c'.
admin:
  listen: %[3]s
log:
  level: info
clusters:
  dev:
    bootstrap_servers: [%[1]s]
virtual_clusters:
  - name: demo
    cluster: dev
    listen: %[2]s
    filters: []
`

func runDemo(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("demo", stderr)
	listen := fs.String("listen", "127.0.0.1:19092", "the gateway's bootstrap address; node N is served on its port+1+N")
	brokerListen := fs.String("broker-listen", devbroker.DefaultListen, "the development cluster's first broker")
	adminListen := fs.String("admin", "127.0.0.1:9190", "the admin listener (/metrics, /healthz, /readyz)")
	logLevel := fs.String("log-level", "warn", "gateway log level: debug, info, warn, error")
	if err := parse(fs, args); err != nil {
		return err
	}
	log, err := telemetry.NewLogger(stderr, *logLevel, "text")
	if err != nil {
		return err
	}
	fmt.Fprintln(stderr, devWarning)
	broker, err := devbroker.Start(devbroker.Options{
		Listen: *brokerListen, AutoCreateTopics: true, Topics: []string{"demo"},
	})
	if err != nil {
		return fmt.Errorf("development cluster: %w (pick other ports with --broker-listen)", err)
	}
	defer broker.Close()

	dir, err := os.MkdirTemp("", "strait-demo-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	cfgPath := filepath.Join(dir, "demo.yaml")
	quoted := ""
	for i, a := range broker.Addrs() {
		if i > 0 {
			quoted += ", "
		}
		quoted += strconv.Quote(a)
	}
	yml := fmt.Sprintf(demoConfig, quoted, *listen, *adminListen)
	if err := os.WriteFile(cfgPath, []byte(yml), 0o600); err != nil {
		return err
	}
	cfg, filters, err := loadConfig(cfgPath)
	if err != nil {
		return fmt.Errorf("demo config:\n%w", err)
	}
	cfg.Log.Level = *logLevel
	g, err := startGateway(cfg, filters, log)
	if err != nil {
		return fmt.Errorf("%w (pick other ports with --listen and --admin)", err)
	}
	defer g.stop(context.Background())

	vc := cfg.VirtualClusters[0]
	first, _ := vc.NodePort(0)
	last, _ := vc.NodePort(int32(len(broker.Addrs()) - 1))
	fmt.Fprintf(stdout, "\nStrait demo is running.\n\n")
	fmt.Fprintf(stdout, "  development cluster: %d brokers at %v\n", len(broker.Addrs()), broker.Addrs())
	fmt.Fprintf(stdout, "  gateway bootstrap:   %s (brokers appear as %s:%d-%d)\n", *listen, vc.AdvertisedHost(), first, last)
	fmt.Fprintf(stdout, "  admin:               http://%s/metrics  /healthz  /readyz\n", *adminListen)
	fmt.Fprintf(stdout, "  config:              %s\n\n", cfgPath)

	if err := selfCheck(ctx, *listen); err != nil {
		fmt.Fprintf(stdout, "Self-check FAILED: %v\n\n", err)
	} else {
		fmt.Fprintf(stdout, "Self-check: produced 3 records to topic \"demo\" through the gateway and read them back.\n\n")
	}
	fmt.Fprintf(stdout, "Try it from another terminal:\n")
	fmt.Fprintf(stdout, "  kcat -b %s -L                  # the brokers listed are the gateway's addresses\n", *listen)
	fmt.Fprintf(stdout, "  echo 'hello:from kcat' | kcat -b %s -t demo -P -K:\n", *listen)
	fmt.Fprintf(stdout, "  kcat -b %s -t demo -C -e -f '%%p/%%o %%k=%%s\\n'\n", *listen)
	fmt.Fprintf(stdout, "  curl -s http://%s/metrics | grep strait_kafka_requests_total\n", *adminListen)
	fmt.Fprintf(stdout, "  strait validate -c %s\n\n", cfgPath)
	fmt.Fprintf(stdout, "Press Ctrl-C to stop.\n")
	<-ctx.Done()
	fmt.Fprintln(stderr, "stopping")
	return nil
}

// selfCheck produces three records through the gateway and reads them back.
func selfCheck(ctx context.Context, bootstrap string) error {
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(bootstrap), kgo.ConsumeTopics("demo"))
	if err != nil {
		return err
	}
	defer cl.Close()
	probe := strconv.FormatInt(time.Now().UnixNano(), 36)
	var recs []*kgo.Record
	for i := range 3 {
		recs = append(recs, &kgo.Record{Topic: "demo", Key: []byte("self-check"), Value: []byte(probe + "-" + strconv.Itoa(i))})
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		return fmt.Errorf("produce: %w", err)
	}
	seen := 0
	for seen < 3 {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			return fmt.Errorf("read back %d of 3 records: %w", seen, ctx.Err())
		}
		fs.EachRecord(func(r *kgo.Record) {
			if len(r.Value) > len(probe) && string(r.Value[:len(probe)]) == probe {
				seen++
			}
		})
	}
	return nil
}
