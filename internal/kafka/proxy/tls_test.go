package proxy

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"math/big"
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

// testCA issues certificates for 127.0.0.1 from one throwaway CA.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pool *x509.CertPool
}

func newTestCA(t *testing.T) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "strait test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return &testCA{cert: cert, key: key, pool: pool}
}

func (ca *testCA) issue(t *testing.T, name string, usage x509.ExtKeyUsage) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
		ExtKeyUsage: []x509.ExtKeyUsage{usage}, KeyUsage: x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// TestTLSBothWays: clients reach the gateway over mutual TLS, and the
// gateway reaches a broker that demands mutual TLS too, each side with its
// own certificate.
func TestTLSBothWays(t *testing.T) {
	ca := newTestCA(t)
	brokerTLS := &tls.Config{
		Certificates: []tls.Certificate{ca.issue(t, "broker", x509.ExtKeyUsageServerAuth)},
		ClientCAs:    ca.pool, ClientAuth: tls.RequireAndVerifyClientCert, MinVersion: tls.VersionTLS12,
	}
	gatewayClientCert := ca.issue(t, "gateway", x509.ExtKeyUsageClientAuth)
	g := startGateway(t, func(o *Options) {
		o.Target.TLS = &tls.Config{RootCAs: ca.pool, Certificates: []tls.Certificate{gatewayClientCert}, MinVersion: tls.VersionTLS12}
		o.TLS = &tls.Config{
			Certificates: []tls.Certificate{ca.issue(t, "gateway", x509.ExtKeyUsageServerAuth)},
			ClientCAs:    ca.pool, ClientAuth: tls.RequireAndVerifyClientCert,
			MinVersion: tls.VersionTLS12, SessionTicketsDisabled: true,
		}
	}, kfake.TLS(brokerTLS))

	ctx := testCtx(t, 30*time.Second)
	clientTLS := &tls.Config{RootCAs: ca.pool, Certificates: []tls.Certificate{ca.issue(t, "app", x509.ExtKeyUsageClientAuth)}}
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
	bare, err := kgo.NewClient(kgo.SeedBrokers(g.addr), kgo.DialTLSConfig(&tls.Config{RootCAs: ca.pool}),
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
	ca := newTestCA(t)
	g := startGateway(t, func(o *Options) {
		o.TLS = &tls.Config{Certificates: []tls.Certificate{ca.issue(t, "gateway", x509.ExtKeyUsageServerAuth)}, MinVersion: tls.VersionTLS12}
	})
	rc := dialRaw(t, g.addr)
	rc.send(apiVersionsV3("plain"), 1)
	rc.expectClosed() // fails the test if the gateway keeps it open
	g.waitErr(t, errTLSHandshake, 1)
	cl, err := kgo.NewClient(kgo.SeedBrokers(g.addr), kgo.DialTLSConfig(&tls.Config{RootCAs: ca.pool}))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if err := cl.Ping(testCtx(t, 10*time.Second)); err != nil {
		t.Fatalf("TLS client after a plaintext one: %v", err)
	}
}
