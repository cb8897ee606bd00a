package config

import (
	"crypto/tls"
	"fmt"

	"github.com/straitgw/strait/internal/tlsfiles"
)

// Build returns the TLS configuration for connections to a cluster's
// brokers, or nil (and no error) when t is nil or not enabled.
//
// When ServerName is empty the returned config has none either: dial with
// tls.Dialer, which fills it from the broker's host, or set it per
// connection.
func (t *TLSClient) Build() (*tls.Config, error) {
	if t == nil || !t.Enabled {
		return nil, nil
	}
	cfg := &tls.Config{
		MinVersion:         tls.VersionTLS12,
		ServerName:         t.ServerName,
		InsecureSkipVerify: t.InsecureSkipVerify,
	}
	if t.CAFile != "" {
		pool, err := loadCertPool(t.CAFile)
		if err != nil {
			return nil, fmt.Errorf("tls ca_file: %w", err)
		}
		cfg.RootCAs = pool
	}
	if t.CertFile != "" || t.KeyFile != "" {
		// Re-read when the files change: a rotated client certificate
		// serves the next broker connection.
		certs, err := tlsfiles.Load([]tlsfiles.Pair{{CertFile: t.CertFile, KeyFile: t.KeyFile}}, nil)
		if err != nil {
			return nil, fmt.Errorf("tls cert_file/key_file: %w", err)
		}
		cfg.GetClientCertificate = certs.GetClientCertificate
	}
	return cfg, nil
}

// Build returns the TLS configuration for a virtual cluster's listeners, or
// nil (and no error) when t is nil.
func (t *TLSServer) Build() (*tls.Config, error) {
	if t == nil {
		return nil, nil
	}
	var pairs []tlsfiles.Pair
	if t.CertFile != "" {
		pairs = append(pairs, tlsfiles.Pair{CertFile: t.CertFile, KeyFile: t.KeyFile})
	}
	for _, c := range t.Certificates {
		pairs = append(pairs, tlsfiles.Pair{CertFile: c.CertFile, KeyFile: c.KeyFile})
	}
	// Re-read when the files change, so a rotation needs no restart; a
	// client's server name picks among several.
	certs, err := tlsfiles.Load(pairs, nil)
	if err != nil {
		return nil, fmt.Errorf("tls: %w", err)
	}
	cfg := &tls.Config{
		GetCertificate: certs.GetCertificate,
		// kafka-python 2.0.2 breaks on the session tickets a Go server
		// sends after a TLS 1.3 handshake, so never send them.
		SessionTicketsDisabled: true,
	}
	switch t.MinVersion {
	case "", "1.2":
		cfg.MinVersion = tls.VersionTLS12
	case "1.3":
		cfg.MinVersion = tls.VersionTLS13
	default:
		return nil, fmt.Errorf("tls min_version %q: use 1.2 or 1.3", t.MinVersion)
	}
	switch t.ClientAuth {
	case "", "none":
		cfg.ClientAuth = tls.NoClientCert
	case "request":
		cfg.ClientAuth = tls.VerifyClientCertIfGiven
	case "require":
		cfg.ClientAuth = tls.RequireAndVerifyClientCert
	default:
		return nil, fmt.Errorf("tls client_auth %q: use none, request or require", t.ClientAuth)
	}
	if t.ClientCAFile != "" {
		pool, err := loadCertPool(t.ClientCAFile)
		if err != nil {
			return nil, fmt.Errorf("tls client_ca_file: %w", err)
		}
		cfg.ClientCAs = pool
	}
	if cfg.ClientAuth != tls.NoClientCert && cfg.ClientCAs == nil {
		return nil, fmt.Errorf("tls client_auth %q needs client_ca_file", t.ClientAuth)
	}
	return cfg, nil
}
