package schema

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"io"
	"log"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/straitgw/strait/bench/schemas"
	"github.com/straitgw/strait/internal/testkit"
)

func newREST(t *testing.T, cfg RegistryConfig) *REST {
	t.Helper()
	r, err := NewREST(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestRESTLookups(t *testing.T) {
	f := newFakeRegistry(t).start(t)
	avroID := f.register("orders-value", fakeSchema{Schema: schemas.Avro})
	protoID := f.register("orders-proto-value", fakeSchema{Schema: schemas.Proto, Type: "PROTOBUF"})
	f.register("orders-value", fakeSchema{Schema: schemas.JSONSchema, Type: "JSON"})
	f.register("other", fakeSchema{Schema: schemas.Avro})
	src := newREST(t, RegistryConfig{URL: f.url()})
	ctx := context.Background()

	def, err := src.SchemaByID(ctx, avroID)
	if err != nil {
		t.Fatal(err)
	}
	if def.Format != Avro || def.Text != schemas.Avro || def.ID != avroID {
		t.Errorf("SchemaByID(%d) = %+v, want the Avro schema (schemaType absent means AVRO)", avroID, def)
	}
	def, err = src.SchemaByID(ctx, protoID)
	if err != nil || def.Format != Protobuf {
		t.Errorf("SchemaByID(%d) = %v, %v; want PROTOBUF", protoID, def.Format, err)
	}
	latest, err := src.SchemaByVersion(ctx, "orders-value", Latest)
	if err != nil || latest.Version != 2 || latest.Format != JSON || latest.Subject != "orders-value" {
		t.Errorf("latest of orders-value = %+v, %v; want version 2, JSON", latest, err)
	}
	v1, err := src.SchemaByVersion(ctx, "orders-value", 1)
	if err != nil || v1.ID != avroID {
		t.Errorf("version 1 of orders-value = %+v, %v; want id %d", v1, err, avroID)
	}
	svs, err := src.SubjectVersionsByID(ctx, avroID)
	if err != nil || len(svs) != 2 {
		t.Errorf("SubjectVersionsByID(%d) = %v, %v; want orders-value and other", avroID, svs, err)
	}

	tests := []struct {
		name string
		call func() error
		kind error
		msg  string
	}{
		{"unknown id (40403)", func() error { _, err := src.SchemaByID(ctx, 99); return err }, ErrNotFound, "schema id 99 not found"},
		{"subjects of an unknown id (40403)", func() error { _, err := src.SubjectVersionsByID(ctx, 99); return err }, ErrNotFound, "subjects of schema id 99 not found"},
		{"unknown subject (40401)", func() error { _, err := src.SchemaByVersion(ctx, "nope", 1); return err }, ErrNotFound, `subject "nope" version 1 not found`},
		{"unknown version (40402)", func() error { _, err := src.SchemaByVersion(ctx, "orders-value", 7); return err }, ErrNotFound, `subject "orders-value" version 7 not found`},
		{"invalid version (42202)", func() error { _, err := src.SchemaByVersion(ctx, "orders-value", 0); return err }, nil, "error code 42202"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.call()
			if err == nil || !strings.Contains(err.Error(), tt.msg) {
				t.Fatalf("got %v, want an error containing %q", err, tt.msg)
			}
			for _, k := range []error{ErrNotFound, ErrUnavailable, ErrInvalidSchema} {
				if errors.Is(err, k) != (k == tt.kind) {
					t.Errorf("errors.Is(%v, %v) = %v", err, k, !(k == tt.kind))
				}
			}
		})
	}
}

func TestRESTUnavailable(t *testing.T) {
	ctx := context.Background()
	f := newFakeRegistry(t).start(t)
	f.register("s", fakeSchema{Schema: schemas.Avro})

	f.down.Store(true)
	_, err := newREST(t, RegistryConfig{URL: f.url()}).SchemaByID(ctx, 1)
	if !errors.Is(err, ErrUnavailable) || errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), "50001") {
		t.Errorf("registry answering 500/50001: %v, want ErrUnavailable", err)
	}
	f.down.Store(false)

	// A base URL that misses the API's root: the generic 404 has no 404xx
	// code, and must not read as "schema not found".
	_, err = newREST(t, RegistryConfig{URL: f.url() + "/wrong"}).SchemaByID(ctx, 1)
	if !errors.Is(err, ErrUnavailable) || errors.Is(err, ErrNotFound) {
		t.Errorf("wrong base path: %v, want ErrUnavailable", err)
	}

	// Nothing listening.
	closed := newFakeRegistry(t).start(t)
	addr := closed.url()
	closed.srv.Close()
	_, err = newREST(t, RegistryConfig{URL: addr, Timeout: 2 * time.Second}).SchemaByID(ctx, 1)
	if !errors.Is(err, ErrUnavailable) {
		t.Errorf("closed registry: %v, want ErrUnavailable", err)
	}

	// A registry that does not answer in time.
	slow := newFakeRegistry(t)
	slow.gate = make(chan struct{})
	slow.start(t)
	defer close(slow.gate)
	_, err = newREST(t, RegistryConfig{URL: slow.url(), Timeout: 50 * time.Millisecond}).SchemaByID(ctx, 1)
	if !errors.Is(err, ErrUnavailable) {
		t.Errorf("slow registry: %v, want ErrUnavailable", err)
	}
}

func TestRESTAuth(t *testing.T) {
	ctx := context.Background()
	f := newFakeRegistry(t).start(t)
	f.register("s", fakeSchema{Schema: schemas.Avro})

	basic := "Basic " + base64.StdEncoding.EncodeToString([]byte("key:secret"))
	f.auth = basic
	if _, err := newREST(t, RegistryConfig{URL: f.url(), Username: "key", Password: "secret"}).SchemaByID(ctx, 1); err != nil {
		t.Errorf("basic auth: %v", err)
	}
	_, err := newREST(t, RegistryConfig{URL: f.url(), Username: "key", Password: "wrong"}).SchemaByID(ctx, 1)
	if !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "refused our credentials") {
		t.Errorf("wrong password: %v, want ErrUnavailable naming the credentials", err)
	}
	f.mu.Lock()
	f.auth = "Bearer t0ken"
	f.mu.Unlock()
	if _, err := newREST(t, RegistryConfig{URL: f.url(), BearerToken: "t0ken"}).SchemaByID(ctx, 1); err != nil {
		t.Errorf("bearer token: %v", err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	want := []string{basic, "Basic " + base64.StdEncoding.EncodeToString([]byte("key:wrong")), "Bearer t0ken"}
	if strings.Join(f.seenAuth, "|") != strings.Join(want, "|") {
		t.Errorf("Authorization headers sent: %q, want %q", f.seenAuth, want)
	}
}

func TestRESTMutualTLS(t *testing.T) {
	ctx := context.Background()
	ca := testkit.NewCA(t)
	f := newFakeRegistry(t)
	f.register("s", fakeSchema{Schema: schemas.Avro})
	f.srv.TLS = ca.ServerTLS(t)
	f.srv.TLS.ClientAuth = tls.RequireAndVerifyClientCert
	f.srv.TLS.ClientCAs = ca.Pool
	f.srv.Config.ErrorLog = log.New(io.Discard, "", 0) // the refused handshakes below
	f.srv.StartTLS()
	t.Cleanup(f.srv.Close)

	dir := t.TempDir()
	caFile := filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(caFile, ca.PEM, 0o600); err != nil {
		t.Fatal(err)
	}
	cert := ca.Issue(t, "strait", x509.ExtKeyUsageClientAuth)
	keyDER, err := x509.MarshalPKCS8PrivateKey(cert.PrivateKey)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile := filepath.Join(dir, "client.pem"), filepath.Join(dir, "client-key.pem")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cert.Certificate[0]}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		t.Fatal(err)
	}

	src := newREST(t, RegistryConfig{URL: f.url(), TLS: &RegistryTLS{CAFile: caFile, CertFile: certFile, KeyFile: keyFile}})
	if _, err := src.SchemaByID(ctx, 1); err != nil {
		t.Fatalf("mutual TLS: %v", err)
	}
	noCert := newREST(t, RegistryConfig{URL: f.url(), TLS: &RegistryTLS{CAFile: caFile}})
	if _, err := noCert.SchemaByID(ctx, 1); !errors.Is(err, ErrUnavailable) {
		t.Errorf("without a client certificate: %v, want ErrUnavailable", err)
	}
	untrusted := newREST(t, RegistryConfig{URL: f.url(), TLS: &RegistryTLS{CertFile: certFile, KeyFile: keyFile}})
	if _, err := untrusted.SchemaByID(ctx, 1); !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "certificate") {
		t.Errorf("without the CA: %v, want ErrUnavailable about the certificate", err)
	}
	if _, err := NewREST(RegistryConfig{URL: f.url(), TLS: &RegistryTLS{CAFile: filepath.Join(dir, "missing.pem")}}); err == nil {
		t.Error("a missing CA file is not an error at construction")
	}
}

func TestRegistryConfigValidate(t *testing.T) {
	tests := []struct {
		cfg  RegistryConfig
		want string
	}{
		{RegistryConfig{}, "registry url is required"},
		{RegistryConfig{URL: "ftp://x"}, "want http:// or https://"},
		{RegistryConfig{URL: "http://u:p@x"}, "not in the url"},
		{RegistryConfig{URL: "http://x", Username: "u"}, "set both or neither"},
		{RegistryConfig{URL: "http://x", Username: "u", Password: "p", BearerToken: "t"}, "not both"},
		{RegistryConfig{URL: "http://x", TLS: &RegistryTLS{}}, "url is http://"},
		{RegistryConfig{URL: "https://x", TLS: &RegistryTLS{CertFile: "c"}}, "cert_file and key_file"},
		{RegistryConfig{URL: "https://x", Timeout: -1}, "negative"},
	}
	for _, tt := range tests {
		if err := tt.cfg.Validate(); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("Validate(%+v) = %v, want %q", tt.cfg, err, tt.want)
		}
	}
	ok := RegistryConfig{URL: "https://registry.example:8081", Username: "u", Password: "p", TLS: &RegistryTLS{CAFile: "ca.pem"}}
	if err := ok.Validate(); err != nil {
		t.Errorf("valid config: %v", err)
	}
}

func TestCacheHit(t *testing.T) {
	f := newFakeRegistry(t).start(t)
	id := f.register("orders-value", fakeSchema{Schema: schemas.Avro})
	r := NewRegistry(newREST(t, RegistryConfig{URL: f.url()}), Options{})
	ctx := context.Background()
	s1, err := r.SchemaByID(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	s2, err := r.SchemaByID(ctx, id)
	if err != nil || s1 != s2 {
		t.Fatalf("second lookup: %p, %v; want the cached %p", s2, err, s1)
	}
	if n := f.count("/schemas/ids/1"); n != 1 {
		t.Errorf("%d requests for id 1, want 1", n)
	}
	if s1.Avro() == nil || s1.Avro().FullName() != "dev.strait.bench.Record" {
		t.Errorf("compiled schema: %+v", s1)
	}
	if got, ok := r.Cached(id); !ok || got != s1 {
		t.Error("Cached does not return the schema")
	}
}

func TestConcurrentLookupsShareOneRequest(t *testing.T) {
	f := newFakeRegistry(t)
	id := f.register("orders-value", fakeSchema{Schema: schemas.Proto, Type: "PROTOBUF"})
	f.gate = make(chan struct{})
	f.start(t)
	r := NewRegistry(newREST(t, RegistryConfig{URL: f.url()}), Options{})

	const callers = 50
	var wg sync.WaitGroup
	results := make([]*Schema, callers)
	errs := make([]error, callers)
	for i := range callers {
		wg.Go(func() {
			results[i], errs[i] = r.SchemaByID(context.Background(), id)
		})
	}
	waitFor(t, "all callers to wait on one lookup", func() bool { return r.waiting.Load() == callers })
	close(f.gate)
	wg.Wait()
	for i := range callers {
		if errs[i] != nil || results[i] != results[0] {
			t.Fatalf("caller %d: %p, %v; want the shared schema %p", i, results[i], errs[i], results[0])
		}
	}
	if n := f.total.Load(); n != 1 {
		t.Errorf("%d requests for %d concurrent lookups, want 1", n, callers)
	}
}

func TestCallerCancellationDoesNotFailOthers(t *testing.T) {
	f := newFakeRegistry(t)
	id := f.register("s", fakeSchema{Schema: schemas.Avro})
	f.gate = make(chan struct{})
	f.start(t)
	r := NewRegistry(newREST(t, RegistryConfig{URL: f.url()}), Options{})

	ctx, cancel := context.WithCancel(context.Background())
	impatient := make(chan error, 1)
	go func() {
		_, err := r.SchemaByID(ctx, id)
		impatient <- err
	}()
	patient := make(chan error, 1)
	go func() {
		_, err := r.SchemaByID(context.Background(), id)
		patient <- err
	}()
	waitFor(t, "both callers to wait", func() bool { return r.waiting.Load() == 2 })
	cancel()
	if err := <-impatient; !errors.Is(err, ErrUnavailable) || !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled caller: %v, want ErrUnavailable wrapping context.Canceled", err)
	}
	close(f.gate)
	if err := <-patient; err != nil {
		t.Errorf("the other caller: %v", err)
	}
}

func TestOutageAfterCaching(t *testing.T) {
	f := newFakeRegistry(t).start(t)
	id := f.register("orders-value", fakeSchema{Schema: schemas.Avro})
	other := f.register("orders-value", fakeSchema{Schema: schemas.JSONSchema, Type: "JSON"})
	clk := newClock()
	r := NewRegistry(newREST(t, RegistryConfig{URL: f.url()}), Options{Now: clk.Now})
	ctx := context.Background()
	rule := &Rule{}
	payload := AppendPrefix(nil, id)
	payload = append(payload, avroRecord(t)...)
	if _, err := r.Validate(ctx, "orders", false, payload, rule); err != nil {
		t.Fatalf("before the outage: %v", err)
	}

	f.down.Store(true)
	before := f.total.Load()
	for range 3 {
		if _, err := r.Validate(ctx, "orders", false, payload, rule); err != nil {
			t.Fatalf("cached schema during the outage: %v", err)
		}
	}
	if f.total.Load() != before {
		t.Errorf("validating a cached schema sent %d requests", f.total.Load()-before)
	}
	// Past the refresh interval the subjects are refreshed in the
	// background; the refresh fails, and the cached answer stands.
	clk.advance(2 * DefaultRefreshInterval)
	if _, err := r.Validate(ctx, "orders", false, payload, rule); err != nil {
		t.Fatalf("stale cached subjects during the outage: %v", err)
	}
	r.refreshes.Wait()
	if _, err := r.Validate(ctx, "orders", false, payload, rule); err != nil {
		t.Fatalf("after a failed refresh: %v", err)
	}

	_, err := r.SchemaByID(ctx, other)
	if !errors.Is(err, ErrUnavailable) || errors.Is(err, ErrNotFound) {
		t.Errorf("uncached id during the outage: %v, want ErrUnavailable", err)
	}
	// An outage is remembered for a second, so that records do not each
	// send a request to a registry that is down; then it is asked again.
	n := f.total.Load()
	if _, err := r.SchemaByID(ctx, other); !errors.Is(err, ErrUnavailable) || f.total.Load() != n {
		t.Errorf("within a second of the failure: %v after %d requests, want ErrUnavailable and none", err, f.total.Load()-n)
	}
	f.down.Store(false)
	clk.advance(outageBackoff)
	if _, err := r.SchemaByID(ctx, other); err != nil {
		t.Errorf("after the outage: %v", err)
	}
}

func TestNotFoundIsRemembered(t *testing.T) {
	f := newFakeRegistry(t).start(t)
	clk := newClock()
	r := NewRegistry(newREST(t, RegistryConfig{URL: f.url()}), Options{Now: clk.Now, NotFoundTTL: 10 * time.Second})
	ctx := context.Background()
	for range 3 {
		if _, err := r.SchemaByID(ctx, 1); !errors.Is(err, ErrNotFound) {
			t.Fatalf("unknown id: %v, want ErrNotFound", err)
		}
	}
	if n := f.count("/schemas/ids/1"); n != 1 {
		t.Errorf("%d requests for an unknown id within the TTL, want 1", n)
	}
	// Registered since: found once the negative answer expires.
	f.register("s", fakeSchema{Schema: schemas.Avro})
	clk.advance(11 * time.Second)
	if _, err := r.SchemaByID(ctx, 1); err != nil {
		t.Errorf("after the TTL: %v", err)
	}
}

func TestMaxNotFoundBounded(t *testing.T) {
	r := NewRegistry(Sources{}, Options{MaxNotFound: 5})
	for id := range 20 {
		if _, err := r.SchemaByID(context.Background(), id+1); !errors.Is(err, ErrNotFound) {
			t.Fatal(err)
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.notFound) > 5 {
		t.Errorf("%d negative entries kept, want at most 5", len(r.notFound))
	}
}

func TestRegisteredRefresh(t *testing.T) {
	f := newFakeRegistry(t).start(t)
	id := f.register("a", fakeSchema{Schema: schemas.Avro})
	clk := newClock()
	r := NewRegistry(newREST(t, RegistryConfig{URL: f.url()}), Options{Now: clk.Now})
	ctx := context.Background()
	if ok, err := r.Registered(ctx, id, "a"); !ok || err != nil {
		t.Fatalf("Registered(a) = %v, %v", ok, err)
	}
	if ok, err := r.Registered(ctx, id, "b"); ok || err != nil {
		t.Fatalf("Registered(b) = %v, %v; want false", ok, err)
	}
	if n := f.count("/schemas/ids/1/versions"); n != 1 {
		t.Errorf("%d requests, want 1: a no within the TTL comes from the cache", n)
	}
	// Registered under b now (the same schema, so the same id): a no is
	// asked again after a second, so a producer that just registered it
	// is not refused for the whole TTL.
	f.register("b", fakeSchema{Schema: schemas.Avro})
	clk.advance(recheckNo)
	if ok, err := r.Registered(ctx, id, "b"); !ok || err != nil {
		t.Errorf("Registered(b) a second after registering = %v, %v", ok, err)
	}
	if n := f.count("/schemas/ids/1/versions"); n != 2 {
		t.Errorf("%d requests, want 2", n)
	}
	// Within the TTL but past the recheck, an outage keeps the cached no.
	f.down.Store(true)
	clk.advance(recheckNo)
	if ok, err := r.Registered(ctx, id, "d"); ok || err != nil {
		t.Errorf("Registered(d) during an outage within the TTL = %v, %v; want the cached no", ok, err)
	}
	f.down.Store(false)
	clk.advance(DefaultNotFoundTTL + time.Second)
	// The registry down, a no that the cache cannot confirm is unknown.
	f.down.Store(true)
	clk.advance(DefaultNotFoundTTL + time.Second)
	if _, err := r.Registered(ctx, id, "c"); !errors.Is(err, ErrUnavailable) {
		t.Errorf("Registered(c) during an outage: %v, want ErrUnavailable", err)
	}
	if ok, err := r.Registered(ctx, id, "a"); !ok || err != nil {
		t.Errorf("Registered(a) during an outage = %v, %v; want the cached yes", ok, err)
	}
}

func TestLatestRefresh(t *testing.T) {
	f := newFakeRegistry(t).start(t)
	f.register("s", fakeSchema{Schema: schemas.Avro})
	clk := newClock()
	r := NewRegistry(newREST(t, RegistryConfig{URL: f.url()}), Options{Now: clk.Now})
	ctx := context.Background()
	s, err := r.SchemaByVersion(ctx, "s", Latest)
	if err != nil || s.Format != Avro {
		t.Fatalf("latest = %v, %v", s, err)
	}
	f.register("s", fakeSchema{Schema: schemas.JSONSchema, Type: "JSON"})
	if s, _ := r.SchemaByVersion(ctx, "s", Latest); s.Format != Avro {
		t.Errorf("latest within the refresh interval = %v, want the cached Avro", s.Format)
	}
	clk.advance(2 * DefaultRefreshInterval)
	_, _ = r.SchemaByVersion(ctx, "s", Latest) // serves the old answer, refreshes behind it
	r.refreshes.Wait()
	if s, _ := r.SchemaByVersion(ctx, "s", Latest); s.Format != JSON {
		t.Errorf("latest after the refresh = %v, want JSON", s.Format)
	}
	if _, err := r.SchemaByVersion(ctx, "nope", Latest); !errors.Is(err, ErrNotFound) {
		t.Errorf("unknown subject: %v", err)
	}
}

func TestReferences(t *testing.T) {
	f := newFakeRegistry(t).start(t)
	ctx := context.Background()

	// Avro: a named type from another subject, which itself uses one.
	f.register("currency", fakeSchema{Schema: `{"type":"enum","name":"Currency","namespace":"common","symbols":["EUR","USD"]}`})
	f.register("money", fakeSchema{
		Schema:     `{"type":"record","name":"Money","namespace":"common","fields":[{"name":"cents","type":"long"},{"name":"currency","type":"common.Currency"}]}`,
		References: []Reference{{Name: "common.Currency", Subject: "currency", Version: 1}},
	})
	avroID := f.register("invoice-value", fakeSchema{
		Schema:     `{"type":"record","name":"Invoice","namespace":"billing","fields":[{"name":"total","type":"common.Money"},{"name":"fee","type":"common.Money"}]}`,
		References: []Reference{{Name: "common.Money", Subject: "money", Version: 1}, {Name: "common.Currency", Subject: "currency", Version: 1}},
	})
	// Protobuf: an import.
	f.register("money-proto", fakeSchema{Type: "PROTOBUF", Schema: "syntax = \"proto3\";\npackage common;\nmessage Money { int64 cents = 1; string currency = 2; }\n"})
	protoID := f.register("invoice-proto-value", fakeSchema{Type: "PROTOBUF",
		Schema:     "syntax = \"proto3\";\npackage billing;\nimport \"common/money.proto\";\nmessage Invoice { common.Money total = 1; }\n",
		References: []Reference{{Name: "common/money.proto", Subject: "money-proto", Version: 1}},
	})
	// JSON Schema: a $ref.
	f.register("customer-json", fakeSchema{Type: "JSON", Schema: `{"type":"object","properties":{"name":{"type":"string"}},"required":["name"]}`})
	jsonID := f.register("invoice-json-value", fakeSchema{Type: "JSON",
		Schema:     `{"type":"object","properties":{"customer":{"$ref":"customer.json"}},"required":["customer"]}`,
		References: []Reference{{Name: "customer.json", Subject: "customer-json", Version: 1}},
	})
	// Broken ones.
	missingID := f.register("broken", fakeSchema{Type: "JSON", Schema: `{"$ref":"gone.json"}`,
		References: []Reference{{Name: "gone.json", Subject: "nowhere", Version: 1}}})
	mixedID := f.register("mixed", fakeSchema{Type: "JSON", Schema: `{"$ref":"avro.json"}`,
		References: []Reference{{Name: "avro.json", Subject: "currency", Version: 1}}})

	r := NewRegistry(newREST(t, RegistryConfig{URL: f.url()}), Options{})
	rule := &Rule{Subjects: []string{"invoice-value", "invoice-proto-value", "invoice-json-value"}}
	tests := []struct {
		name    string
		id      int
		body    []byte
		wantErr string
	}{
		{"avro", avroID, []byte{0x02, 0x00, 0x04, 0x02}, ""},
		{"avro, bad enum in the nested reference", avroID, []byte{0x02, 0x00, 0x04, 0x06}, `field "fee.currency": enum common.Currency: symbol index 3 out of range [0, 2)`},
		{"protobuf", protoID, []byte{0, 0x0a, 0x05, 0x12, 0x03, 'E', 'U', 'R'}, ""},
		{"protobuf, bad UTF-8 in the import", protoID, []byte{0, 0x0a, 0x05, 0x12, 0x03, 'E', 0xff, 'R'}, `field "total.currency": string is not valid UTF-8`},
		{"json", jsonID, []byte(`{"customer":{"name":"x"}}`), ""},
		{"json, fault in the referenced schema", jsonID, []byte(`{"customer":{}}`), `field "customer": missing property 'name'`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := r.Validate(ctx, "invoice", false, append(AppendPrefix(nil, tt.id), tt.body...), rule)
			if tt.wantErr == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || err.Error() != tt.wantErr || !errors.Is(err, ErrInvalidRecord) {
				t.Errorf("Validate = %v, want ErrInvalidRecord %q", err, tt.wantErr)
			}
		})
	}
	for _, id := range []int{missingID, mixedID} {
		_, err := r.SchemaByID(ctx, id)
		if !errors.Is(err, ErrInvalidSchema) || errors.Is(err, ErrNotFound) {
			t.Errorf("schema %d with a bad reference: %v, want only ErrInvalidSchema", id, err)
		}
	}
	// Each referenced subject version is fetched once, however many
	// schemas use it.
	if n := f.count("/subjects/currency/versions/1"); n != 1 {
		t.Errorf("currency v1 fetched %d times, want 1", n)
	}
}

func TestReferenceOutageIsUnavailable(t *testing.T) {
	f := newFakeRegistry(t).start(t)
	f.register("customer-json", fakeSchema{Type: "JSON", Schema: `{"type":"object"}`})
	id := f.register("v", fakeSchema{Type: "JSON", Schema: `{"$ref":"c.json"}`,
		References: []Reference{{Name: "c.json", Subject: "customer-json", Version: 1}}})
	var calls int
	src := sourceFunc{
		byID: func(ctx context.Context, id int) (Definition, error) {
			return newREST(t, RegistryConfig{URL: f.url()}).SchemaByID(ctx, id)
		},
		byVersion: func(context.Context, string, int) (Definition, error) {
			calls++
			return Definition{}, newError(ErrUnavailable, "registry down", nil)
		},
	}
	clk := newClock()
	r := NewRegistry(src, Options{Now: clk.Now})
	if _, err := r.SchemaByID(context.Background(), id); !errors.Is(err, ErrUnavailable) || errors.Is(err, ErrInvalidSchema) {
		t.Errorf("reference lookup during an outage: %v, want ErrUnavailable only", err)
	}
	clk.advance(outageBackoff)
	if _, err := r.SchemaByID(context.Background(), id); !errors.Is(err, ErrUnavailable) || calls != 2 {
		t.Errorf("second try: %v after %d reference lookups; an outage must not be remembered for long", err, calls)
	}
}

// sourceFunc is a Source made of functions, for tests.
type sourceFunc struct {
	byID      func(context.Context, int) (Definition, error)
	byVersion func(context.Context, string, int) (Definition, error)
	versions  func(context.Context, int) ([]SubjectVersion, error)
}

func (s sourceFunc) SchemaByID(ctx context.Context, id int) (Definition, error) {
	return s.byID(ctx, id)
}

func (s sourceFunc) SchemaByVersion(ctx context.Context, subject string, version int) (Definition, error) {
	return s.byVersion(ctx, subject, version)
}

func (s sourceFunc) SubjectVersionsByID(ctx context.Context, id int) ([]SubjectVersion, error) {
	return s.versions(ctx, id)
}

func TestPanickingSourceIsAnError(t *testing.T) {
	r := NewRegistry(sourceFunc{byID: func(context.Context, int) (Definition, error) { panic("boom") }}, Options{})
	if _, err := r.SchemaByID(context.Background(), 1); !errors.Is(err, ErrInvalidSchema) {
		t.Errorf("panicking source: %v, want ErrInvalidSchema", err)
	}
}
