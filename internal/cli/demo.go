package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/straitgw/strait/internal/auth/credstore"
	"github.com/straitgw/strait/internal/devbroker"
	"github.com/straitgw/strait/internal/devregistry"
	"github.com/straitgw/strait/internal/kms/vault"
	"github.com/straitgw/strait/internal/mockllm"
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
    filters:
      # Topics named secure-* are stored encrypted (docs/encryption.md).
      - type: record-encryption
        config:
          kms: {type: vault, path: %[6]q}
          topics: ["secure-*"]
          kek: demo-kek
          encrypt_headers: true
      # Topics named events* take valid JSON only; orders* take records in
      # the Confluent wire format whose schema is registered under
      # <topic>-value in the demo registry, and that match it
      # (docs/validation.md).
      - type: record-validation
        config:
          registry: {url: "%[7]s"}
          rules:
            - topics: ["orders*"]
              value: {schema: {strategy: topic-name}}
            - topics: ["events*"]
              value: {json: {}}
  # The same cluster behind SASL: clients authenticate to the gateway (the
  # demo user is in a credential store made for the demo), and may use
  # only topics and groups named demo* (docs/security.md).
  - name: demo-sasl
    cluster: dev
    listen: %[8]s
    sasl:
      mechanisms: [SCRAM-SHA-512, SCRAM-SHA-256, PLAIN]
      credentials: %[9]q
    filters:
      - type: authorization
        config:
          rules:
            - {effect: allow, principals: ["*"], resource: topic, names: ["demo*"], operations: [ALL]}
            - {effect: allow, principals: ["*"], resource: group, names: ["demo*"], operations: [ALL]}
llm:
  listeners:
    - {listen: %[4]s, protocols: [http1, h2c]}
  api_keys:
    # The DEMO key "strait-demo-key" (its SHA-256); never use it for anything real.
    - {name: demo, sha256: 82d9b73d98267c13fa11c4f3a2fdf95b71a04e20d6596760f3bfbf0092ece1e8}
  providers:
    openai-mock: {dialect: openai, base_url: "http://%[5]s", api_key: mock-key}
    anthropic-mock: {dialect: anthropic, base_url: "http://%[5]s", api_key: mock-key}
  routes:
    - {match: "gpt-*", provider: openai-mock, models: [gpt-4o-mini]}
    - {match: "claude-*", provider: anthropic-mock, models: [claude-sonnet-4-5]}
`

// The demo SASL listener's user and password: printed for the reader to
// try, and they protect nothing.
const (
	demoUser     = "demo"
	demoPassword = "strait-demo-password"
)

// demoKey is the demo config's gateway API key; it is printed for the
// reader to try, and it protects nothing.
const demoKey = "strait-demo-key"

func runDemo(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("demo", stdout, stderr)
	listen := fs.String("listen", "127.0.0.1:19092", "the gateway's bootstrap address; node N is served on its port+1+N")
	brokerListen := fs.String("broker-listen", devbroker.DefaultListen, "the development cluster's first broker")
	adminListen := fs.String("admin", "127.0.0.1:9190", "the admin listener (/metrics, /healthz, /readyz)")
	saslListen := fs.String("sasl-listen", "", "the SASL listener's bootstrap address (SCRAM and PLAIN, user demo); node N on its port+1+N (default: the --listen port + 2000, clear of its node ports)")
	llmListen := fs.String("llm-listen", "127.0.0.1:8080", "the LLM gateway's listener (HTTP/1.1 and h2c)")
	mockListen := fs.String("mock-listen", "127.0.0.1:8000", "the mock LLM provider behind the LLM gateway (both dialects)")
	registryListen := fs.String("registry-listen", devregistry.DefaultListen, "the development schema registry (Confluent REST API)")
	logLevel := fs.String("log-level", "warn", "gateway log level: debug, info, warn, error")
	if err := parse(fs, args); err != nil {
		return err
	}
	if *saslListen == "" {
		host, port, err := net.SplitHostPort(*listen)
		p, perr := strconv.Atoi(port)
		if err != nil || perr != nil || p+3000 > 65535 {
			return fmt.Errorf("--listen %q: cannot place the SASL listener 2000 ports above it: give --sasl-listen", *listen)
		}
		*saslListen = net.JoinHostPort(host, strconv.Itoa(p+2000))
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

	reg, err := devregistry.Start(devregistry.Options{Listen: *registryListen})
	if err != nil {
		return fmt.Errorf("development schema registry: %w (pick another port with --registry-listen)", err)
	}
	defer reg.Close()

	mock := mockllm.New(mockllm.Options{Latency: 300 * time.Millisecond, Deltas: 5})
	mockURL, err := mock.Start(*mockListen)
	if err != nil {
		return fmt.Errorf("mock LLM provider: %w (pick another port with --mock-listen)", err)
	}
	defer mock.Close()

	dir, err := os.MkdirTemp("", "strait-demo-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	// A vault of its own with one demo KEK: the demo's keys live and die
	// with the demo.
	vaultDir := filepath.Join(dir, "vault")
	if _, err := vault.CreateKey(vaultDir, "demo-kek"); err != nil {
		return fmt.Errorf("demo vault: %w", err)
	}
	// A credential store with the demo user, for the SASL listener.
	users := filepath.Join(dir, "users.store")
	if _, err := credstore.AddUser(users, demoUser, demoPassword, credstore.MinIterations); err != nil {
		return fmt.Errorf("demo credential store: %w", err)
	}
	cfgPath := filepath.Join(dir, "demo.yaml")
	quoted := ""
	for i, a := range broker.Addrs() {
		if i > 0 {
			quoted += ", "
		}
		quoted += strconv.Quote(a)
	}
	yml := fmt.Sprintf(demoConfig, quoted, *listen, *adminListen, *llmListen, strings.TrimPrefix(mockURL, "http://"), vaultDir, reg.URL(), *saslListen, users)
	if err := os.WriteFile(cfgPath, []byte(yml), 0o600); err != nil {
		return err
	}
	cfg, b, err := loadConfig(cfgPath)
	if err != nil {
		return fmt.Errorf("demo config:\n%w", err)
	}
	cfg.Log.Level = *logLevel
	g, err := startGateway(cfg, b, log, nil)
	if err != nil {
		return fmt.Errorf("%w (pick other ports with --listen, --llm-listen and --admin)", err)
	}
	defer g.stop(context.Background())

	vc := cfg.VirtualClusters[0]
	first, _ := vc.NodePort(0)
	last, _ := vc.NodePort(int32(len(broker.Addrs()) - 1))
	fmt.Fprintf(stdout, "\nStrait demo is running.\n\n")
	fmt.Fprintf(stdout, "  development cluster: %d brokers at %v\n", len(broker.Addrs()), broker.Addrs())
	fmt.Fprintf(stdout, "  gateway bootstrap:   %s (brokers appear as %s:%d-%d)\n", *listen, vc.AdvertisedHost(), first, last)
	fmt.Fprintf(stdout, "  LLM gateway:         http://%s (OpenAI and Anthropic APIs; gpt-* and claude-* go to a mock provider at %s)\n", *llmListen, mockURL)
	fmt.Fprintf(stdout, "  SASL listener:       %s (SCRAM-SHA-512, SCRAM-SHA-256, PLAIN; user %s, password %s; topics and groups demo* only)\n", *saslListen, demoUser, demoPassword)
	fmt.Fprintf(stdout, "  schema registry:     %s (record validation of orders* and events*)\n", reg.URL())
	fmt.Fprintf(stdout, "  admin:               http://%s/metrics  /healthz  /readyz\n", *adminListen)
	fmt.Fprintf(stdout, "  config:              %s\n\n", cfgPath)

	if err := selfCheck(ctx, *listen); err != nil {
		fmt.Fprintf(stdout, "Self-check FAILED: %v\n\n", err)
	} else {
		fmt.Fprintf(stdout, "Self-check: produced 3 records to topic \"demo\" through the gateway and read them back.\n")
	}
	if err := encryptionSelfCheck(ctx, *listen, broker.Addrs()); err != nil {
		fmt.Fprintf(stdout, "Encryption self-check FAILED: %v\n", err)
	} else {
		fmt.Fprintf(stdout, "Encryption self-check: a record produced to \"secure-demo\" reads back as plaintext through the gateway and as ciphertext from the broker.\n")
	}
	if err := validationSelfCheck(ctx, *listen); err != nil {
		fmt.Fprintf(stdout, "Validation self-check FAILED: %v\n", err)
	} else {
		fmt.Fprintf(stdout, "Validation self-check: a JSON record to \"events-demo\" went through; a broken one was refused with INVALID_RECORD.\n")
	}
	if err := saslSelfCheck(ctx, *saslListen); err != nil {
		fmt.Fprintf(stdout, "SASL self-check FAILED: %v\n", err)
	} else {
		fmt.Fprintf(stdout, "SASL self-check: user %s authenticated with SCRAM-SHA-512 and produced to \"demo-sasl\"; producing to \"other\" was refused with TOPIC_AUTHORIZATION_FAILED.\n", demoUser)
	}
	if err := llmSelfCheck(ctx, "http://"+*llmListen); err != nil {
		fmt.Fprintf(stdout, "LLM self-check FAILED: %v\n\n", err)
	} else {
		fmt.Fprintf(stdout, "LLM self-check: an OpenAI-dialect request for claude-sonnet-4-5 was translated to the Anthropic mock and back.\n\n")
	}
	fmt.Fprintf(stdout, "Try it from another terminal:\n")
	fmt.Fprintf(stdout, "  kcat -b %s -L                  # the brokers listed are the gateway's addresses\n", *listen)
	fmt.Fprintf(stdout, "  echo 'hello:from kcat' | kcat -b %s -t demo -P -K:\n", *listen)
	fmt.Fprintf(stdout, "  kcat -b %s -t demo -C -e -f '%%p/%%o %%k=%%s\\n'\n", *listen)
	fmt.Fprintf(stdout, "  echo 'k1:card 4111-1111-1111-1111' | kcat -b %s -t secure-orders -P -K:\n", *listen)
	fmt.Fprintf(stdout, "  kcat -b %s -t secure-orders -C -e              # through Strait: plaintext\n", *listen)
	fmt.Fprintf(stdout, "  kcat -b %s -t secure-orders -C -e              # the broker itself: ciphertext\n", broker.Addrs()[0])
	fmt.Fprintf(stdout, "  echo '{\"ok\":true}' | kcat -b %s -t events-demo -P     # valid JSON: accepted\n", *listen)
	fmt.Fprintf(stdout, "  echo '{broken' | kcat -b %s -t events-demo -P          # refused: Broker: Broker failed to validate record\n", *listen)
	fmt.Fprintf(stdout, "  echo hi | kcat -b %s -X security.protocol=SASL_PLAINTEXT -X sasl.mechanisms=SCRAM-SHA-512 -X sasl.username=%s -X sasl.password=%s -t demo-sasl -P\n", *saslListen, demoUser, demoPassword)
	fmt.Fprintf(stdout, "  echo hi | kcat -b %s -X security.protocol=SASL_PLAINTEXT -X sasl.mechanisms=SCRAM-SHA-512 -X sasl.username=%s -X sasl.password=%s -t other -P   # refused: Topic authorization failed\n", *saslListen, demoUser, demoPassword)
	fmt.Fprintf(stdout, "  curl -s http://%s/metrics | grep strait_kafka_requests_total\n", *adminListen)
	fmt.Fprintf(stdout, "  curl -s http://%s/v1/chat/completions -H 'Authorization: Bearer %s' -H 'Content-Type: application/json' \\\n", *llmListen, demoKey)
	fmt.Fprintf(stdout, "       -d '{\"model\":\"claude-sonnet-4-5\",\"messages\":[{\"role\":\"user\",\"content\":\"Hello\"}]}'\n")
	fmt.Fprintf(stdout, "  curl -sN http://%s/v1/messages -H 'x-api-key: %s' -H 'Content-Type: application/json' \\\n", *llmListen, demoKey)
	fmt.Fprintf(stdout, "       -d '{\"model\":\"gpt-4o-mini\",\"max_tokens\":100,\"stream\":true,\"messages\":[{\"role\":\"user\",\"content\":\"Hello\"}]}'\n")
	fmt.Fprintf(stdout, "  %s validate -c %s\n\n", selfCommand(), shellQuote(cfgPath))
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

// saslSelfCheck authenticates as the demo user with SCRAM-SHA-512 on the
// SASL listener, produces to a demo* topic, and checks that a topic outside
// demo* is refused with TOPIC_AUTHORIZATION_FAILED.
func saslSelfCheck(ctx context.Context, bootstrap string) error {
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(bootstrap), kgo.AllowAutoTopicCreation(), kgo.RecordRetries(1),
		kgo.SASL(scram.Auth{User: demoUser, Pass: demoPassword}.AsSha512Mechanism()))
	if err != nil {
		return err
	}
	defer cl.Close()
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "demo-sasl", Value: []byte("self-check")}).FirstErr(); err != nil {
		return fmt.Errorf("producing to demo-sasl as %s: %w", demoUser, err)
	}
	err = cl.ProduceSync(ctx, &kgo.Record{Topic: "other", Value: []byte("self-check")}).FirstErr()
	if !errors.Is(err, kerr.TopicAuthorizationFailed) {
		return fmt.Errorf("producing to other as %s: got %v, want TOPIC_AUTHORIZATION_FAILED", demoUser, err)
	}
	return nil
}

// validationSelfCheck produces a valid and a broken JSON record to a topic
// whose values must be JSON: the first must land, the second must be
// refused with INVALID_RECORD.
func validationSelfCheck(ctx context.Context, gateway string) error {
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(gateway), kgo.AllowAutoTopicCreation(), kgo.RecordRetries(1))
	if err != nil {
		return err
	}
	defer cl.Close()
	const topic = "events-demo"
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte(`{"self_check":true}`)}).FirstErr(); err != nil {
		return fmt.Errorf("a valid JSON record was not accepted: %w", err)
	}
	err = cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte(`{broken`)}).FirstErr()
	if !errors.Is(err, kerr.InvalidRecord) {
		return fmt.Errorf("a broken JSON record: got %v, want INVALID_RECORD", err)
	}
	return nil
}

// llmSelfCheck sends one OpenAI-dialect request for a Claude model through
// the LLM gateway: translated to the Anthropic mock and back.
func llmSelfCheck(ctx context.Context, base string) error {
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	body := `{"model":"claude-sonnet-4-5","messages":[{"role":"user","content":"Hello"}]}`
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/v1/chat/completions", strings.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+demoKey)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	var out struct {
		Object  string `json:"object"`
		Choices []struct {
			Message struct {
				Content string `json:"content"`
			} `json:"message"`
		} `json:"choices"`
	}
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("HTTP %d: %s", resp.StatusCode, strings.TrimSpace(string(b)))
	}
	if err := json.Unmarshal(b, &out); err != nil || out.Object != "chat.completion" || len(out.Choices) == 0 || out.Choices[0].Message.Content == "" {
		return fmt.Errorf("not an OpenAI chat completion: %s", b)
	}
	return nil
}

// encryptionSelfCheck produces a record to an encrypted topic through the
// gateway, then reads it back through the gateway (it must be the
// plaintext) and straight from the broker (it must not be).
func encryptionSelfCheck(ctx context.Context, gateway string, brokers []string) error {
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	const topic = "secure-demo"
	value := []byte("self-check " + strconv.FormatInt(time.Now().UnixNano(), 36))
	cl, err := kgo.NewClient(kgo.SeedBrokers(gateway), kgo.AllowAutoTopicCreation())
	if err != nil {
		return err
	}
	defer cl.Close()
	rec := &kgo.Record{Topic: topic, Value: value}
	if err := cl.ProduceSync(ctx, rec).FirstErr(); err != nil {
		return fmt.Errorf("produce through the gateway: %w", err)
	}
	read := func(addrs []string) ([]byte, error) {
		c, err := kgo.NewClient(kgo.SeedBrokers(addrs...),
			kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {rec.Partition: kgo.NewOffset().At(rec.Offset)}}))
		if err != nil {
			return nil, err
		}
		defer c.Close()
		for {
			fs := c.PollFetches(ctx)
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			if errs := fs.Errors(); len(errs) > 0 {
				return nil, errs[0].Err
			}
			var got []byte
			fs.EachRecord(func(r *kgo.Record) {
				if r.Offset == rec.Offset && got == nil {
					got = r.Value
				}
			})
			if got != nil {
				return got, nil
			}
		}
	}
	plain, err := read([]string{gateway})
	if err != nil {
		return fmt.Errorf("read through the gateway: %w", err)
	}
	if string(plain) != string(value) {
		return fmt.Errorf("read %q through the gateway, produced %q", plain, value)
	}
	stored, err := read(brokers)
	if err != nil {
		return fmt.Errorf("read from the broker: %w", err)
	}
	if strings.Contains(string(stored), string(value)) {
		return fmt.Errorf("the broker holds the plaintext %q", stored)
	}
	return nil
}
