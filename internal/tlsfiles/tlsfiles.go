// Package tlsfiles serves TLS certificates from PEM files and re-reads them
// when the files change, so that a rotation (cert-manager renewing a
// Kubernetes secret, say) needs no restart. A new pair that does not load
// (a key that does not match, a half-written file) is refused: the one in
// use stays, and the log says why, until a good pair appears.
package tlsfiles

import (
	"crypto/tls"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// Pair is a certificate file and its key file.
type Pair struct{ CertFile, KeyFile string }

// checkEvery bounds how often the files are looked at: at most once a
// second, at a handshake, so a busy listener pays a stat now and then.
const checkEvery = time.Second

// Certs holds certificates loaded from pairs of files, re-read on change.
type Certs struct {
	log *slog.Logger
	// now is time.Now; tests move it.
	now     func() time.Time
	checked atomic.Int64 // unix nanoseconds of the last look at the files

	mu    sync.Mutex
	pairs []pair
	certs atomic.Pointer[[]*tls.Certificate]
}

type pair struct {
	Pair
	stamp string // size and modification time of both files, as loaded
}

// Load reads every pair; any that does not load is an error naming it.
func Load(pairs []Pair, log *slog.Logger) (*Certs, error) {
	if len(pairs) == 0 {
		return nil, fmt.Errorf("no certificate")
	}
	if log == nil {
		log = slog.Default()
	}
	c := &Certs{log: log, now: time.Now}
	certs := make([]*tls.Certificate, len(pairs))
	for i, p := range pairs {
		cert, stamp, err := load(p)
		if err != nil {
			return nil, err
		}
		certs[i] = cert
		c.pairs = append(c.pairs, pair{Pair: p, stamp: stamp})
	}
	c.certs.Store(&certs)
	c.checked.Store(c.now().UnixNano())
	return c, nil
}

func load(p Pair) (*tls.Certificate, string, error) {
	stamp, err := stampOf(p)
	if err != nil {
		return nil, "", err
	}
	cert, err := tls.LoadX509KeyPair(p.CertFile, p.KeyFile)
	if err != nil {
		return nil, "", fmt.Errorf("cert_file %s / key_file %s: %w", p.CertFile, p.KeyFile, err)
	}
	return &cert, stamp, nil
}

func stampOf(p Pair) (string, error) {
	var s string
	for _, f := range []string{p.CertFile, p.KeyFile} {
		fi, err := os.Stat(f)
		if err != nil {
			return "", fmt.Errorf("cannot read %s: %w", f, err)
		}
		s += fmt.Sprintf("%d/%d;", fi.Size(), fi.ModTime().UnixNano())
	}
	return s, nil
}

// Reload looks at the files now and loads the pairs that changed.
func (c *Certs) Reload() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.checked.Store(c.now().UnixNano())
	cur := *c.certs.Load()
	var next []*tls.Certificate
	for i, p := range c.pairs {
		stamp, err := stampOf(p.Pair)
		if err != nil || stamp == p.stamp {
			if err != nil && p.stamp != "gone" {
				c.log.Error("a certificate file cannot be read; keeping the certificate in use", "cert_file", p.CertFile, "err", err)
				c.pairs[i].stamp = "gone"
			}
			continue
		}
		cert, stamp, err := load(p.Pair)
		if err != nil {
			// Refuse it once per change, not per handshake.
			c.pairs[i].stamp = stamp
			c.log.Error("a changed certificate does not load; keeping the certificate in use", "err", err,
				"fix", "write the certificate and its key together (a Kubernetes secret or an atomic rename does)")
			continue
		}
		if next == nil {
			next = append([]*tls.Certificate(nil), cur...)
		}
		next[i] = cert
		c.pairs[i].stamp = stamp
		c.log.Info("certificate reloaded", "cert_file", p.CertFile, "not_after", cert.Leaf.NotAfter)
	}
	if next != nil {
		c.certs.Store(&next)
	}
}

func (c *Certs) maybeReload() {
	if c.now().UnixNano()-c.checked.Load() >= int64(checkEvery) {
		c.Reload()
	}
}

// GetCertificate serves tls.Config.GetCertificate: the first certificate
// the client's hello accepts (its server name among the certificate's
// names, wildcards included), or the first one.
func (c *Certs) GetCertificate(hello *tls.ClientHelloInfo) (*tls.Certificate, error) {
	c.maybeReload()
	certs := *c.certs.Load()
	if len(certs) > 1 {
		for _, cert := range certs {
			if hello.SupportsCertificate(cert) == nil {
				return cert, nil
			}
		}
	}
	return certs[0], nil
}

// GetClientCertificate serves tls.Config.GetClientCertificate (the
// gateway's own certificate toward brokers that ask for one).
func (c *Certs) GetClientCertificate(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
	c.maybeReload()
	return (*c.certs.Load())[0], nil
}
