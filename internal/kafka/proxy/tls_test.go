package proxy

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/straitgw/strait/internal/testkit"
)

// TestTLSBothWays: clients reach the gateway over mutual TLS, and the
// gateway reaches a broker that demands mutual TLS too, each side with its
// own certificate.
func TestTLSBothWays(t *testing.T) {
	ca := testkit.NewCA(t)
	brokerTLS := &tls.Config{
		Certificates: []tls.Certificate{ca.Issue(t, "broker", x509.ExtKeyUsageServerAuth)},
		ClientCAs:    ca.Pool, ClientAuth: tls.RequireAndVerifyClientCert, MinVersion: tls.VersionTLS12,
	}
	gatewayClientCert := ca.Issue(t, "gateway", x509.ExtKeyUsageClientAuth)
	g := startGateway(t, func(o *Options) {
		o.Target.TLS = &tls.Config{RootCAs: ca.Pool, Certificates: []tls.Certificate{gatewayClientCert}, MinVersion: tls.VersionTLS12}
		o.TLS = &tls.Config{
			Certificates: []tls.Certificate{ca.Issue(t, "gateway", x509.ExtKeyUsageServerAuth)},
			ClientCAs:    ca.Pool, ClientAuth: tls.RequireAndVerifyClientCert,
			MinVersion: tls.VersionTLS12, SessionTicketsDisabled: true,
		}
	}, kfake.TLS(brokerTLS))

	ctx := testCtx(t, 30*time.Second)
	clientTLS := &tls.Config{RootCAs: ca.Pool, Certificates: []tls.Certificate{ca.Issue(t, "app", x509.ExtKeyUsageClientAuth)}}
	cl, err := kgo.NewClient(kgo.SeedBrokers(g.addr), kgo.DialTLSConfig(clientTLS),
		kgo.DefaultProduceTopic("tls"), kgo.ConsumeTopics("tls"), kgo.AllowAutoTopicCreation())
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("over tls")}).FirstErr(); err != nil {
		t.Fatalf("produce through TLS both ways: %v", err)
	}
	fs := cl.PollFetches(ctx)
	if err := fs.Err0(); err != nil {
		t.Fatal(err)
	}
	if recs := fs.Records(); len(recs) != 1 || string(recs[0].Value) != "over tls" {
		t.Fatalf("consumed %d records, want the one produced", len(recs))
	}

	// A client without a certificate is refused by the gateway.
	bare, err := kgo.NewClient(kgo.SeedBrokers(g.addr), kgo.DialTLSConfig(&tls.Config{RootCAs: ca.Pool}),
		kgo.RequestRetries(0), kgo.RetryTimeout(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer bare.Close()
	pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := bare.Ping(pctx); err == nil {
		t.Fatal("a client without a certificate got through a gateway that requires one")
	}
	g.waitErr(t, errTLSHandshake, 1)
}

// TestTLSPlaintextClientOnTLSListener: a plaintext client on a TLS port
// is refused with a counted handshake error; the listener keeps serving.
func TestTLSPlaintextClientOnTLSListener(t *testing.T) {
	ca := testkit.NewCA(t)
	g := startGateway(t, func(o *Options) {
		o.TLS = &tls.Config{Certificates: []tls.Certificate{ca.Issue(t, "gateway", x509.ExtKeyUsageServerAuth)}, MinVersion: tls.VersionTLS12}
	})
	rc := dialRaw(t, g.addr)
	rc.send(apiVersionsV3("plain"), 1)
	rc.expectClosed() // fails the test if the gateway keeps it open
	g.waitErr(t, errTLSHandshake, 1)
	cl, err := kgo.NewClient(kgo.SeedBrokers(g.addr), kgo.DialTLSConfig(&tls.Config{RootCAs: ca.Pool}))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if err := cl.Ping(testCtx(t, 10*time.Second)); err != nil {
		t.Fatalf("TLS client after a plaintext one: %v", err)
	}
}
