package cli

import (
	"crypto/x509"
	"fmt"
	"log/slog"

	"github.com/straitgw/strait/internal/auth/authconfig"
	"github.com/straitgw/strait/internal/auth/certprincipal"
	"github.com/straitgw/strait/internal/config"
	"github.com/straitgw/strait/internal/kafka/filter/registry"
	"github.com/straitgw/strait/internal/kafka/proxy"
)

// vcAuth is how one virtual cluster authenticates its clients: SASL
// terminated at the gateway, a certificate mapping, both or neither.
type vcAuth struct {
	built *authconfig.Built
	cert  *certprincipal.Mapper
}

// buildAuth decodes and builds each virtual cluster's sasl block and
// certificate mapping, reporting problems in the config's error format at
// their lines. It opens the credential stores and token validators, so
// that `strait validate` says when a store does not exist yet.
func buildAuth(cfg *config.Config) (map[string]*vcAuth, error) {
	var errs config.Errors
	out := map[string]*vcAuth{}
	for i, vc := range cfg.VirtualClusters {
		p := fmt.Sprintf("virtual_clusters[%d]", i)
		a := &vcAuth{}
		if vc.SASL.Kind != 0 {
			var c authconfig.Config
			err := registry.Decode(&vc.SASL, &c)
			if err == nil {
				err = c.Validate()
			}
			if err == nil {
				a.built, err = c.Build(slog.Default().With("virtual_cluster", vc.Name))
			}
			if err != nil {
				errs.Add(cfg.File, vc.SASL.Line, p+".sasl", oneLine(err))
			}
		}
		if vc.TLS != nil && vc.TLS.Principal != nil {
			m, err := certprincipal.New(certprincipal.Source(vc.TLS.Principal.From), vc.TLS.Principal.Rules)
			if err != nil {
				errs.Add(cfg.File, 0, p+".tls.principal.rules", err.Error())
			}
			a.cert = m
		}
		out[vc.Name] = a
	}
	if len(errs) > 0 {
		return nil, errs
	}
	return out, nil
}

// proxySASL is the proxy's SASL options, nil when SASL is relayed.
func (a *vcAuth) proxySASL() *proxy.SASL {
	if a == nil || a.built == nil {
		return nil
	}
	b := a.built
	return &proxy.SASL{Mechanisms: b.Mechanisms, MaxSessionLifetime: b.MaxSessionLifetime, FailureDelay: b.FailureDelay, FailureBudget: b.FailureBudget}
}

// certPrincipal is the proxy's certificate mapping, nil when there is none.
func (a *vcAuth) certPrincipal() func(*x509.Certificate) (string, error) {
	if a == nil || a.cert == nil {
		return nil
	}
	return a.cert.Principal
}
