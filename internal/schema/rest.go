package schema

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/sr"
)

// RegistryConfig says how to reach a registry that speaks the Confluent
// Schema Registry REST API (Confluent, Apicurio's ccompat API, Karapace,
// Redpanda, strait registry).
type RegistryConfig struct {
	// URL is the registry's base URL, http:// or https://.
	URL string `yaml:"url"`
	// Username and Password are sent as HTTP basic auth (Confluent Cloud's
	// API key and secret). Both or neither.
	Username string `yaml:"username"`
	Password string `yaml:"password"`
	// BearerToken is sent as an Authorization: Bearer header instead.
	BearerToken string `yaml:"bearer_token"`
	// TLS configures https:// registries: the CA to trust, a client
	// certificate for mutual TLS.
	TLS *RegistryTLS `yaml:"tls"`
	// Timeout bounds each request to the registry. Default 5 s.
	Timeout time.Duration `yaml:"timeout"`
}

// RegistryTLS configures TLS toward the registry.
type RegistryTLS struct {
	// CAFile is a PEM file of the CAs to trust instead of the system's.
	CAFile string `yaml:"ca_file"`
	// CertFile and KeyFile are a PEM client certificate and key, for
	// mutual TLS. Both or neither.
	CertFile string `yaml:"cert_file"`
	KeyFile  string `yaml:"key_file"`
	// ServerName overrides the name the registry's certificate must have.
	ServerName string `yaml:"server_name"`
	// InsecureSkipVerify accepts any certificate: for tests only.
	InsecureSkipVerify bool `yaml:"insecure_skip_verify"`
}

// DefaultRegistryTimeout bounds a registry request when Timeout is unset.
const DefaultRegistryTimeout = 5 * time.Second

// maxResponseBytes bounds a registry response: a schema is a few kilobytes,
// and a broken or hostile server must not make the gateway buffer without
// end.
const maxResponseBytes = 16 << 20

// Validate checks the config without reading any file.
func (c *RegistryConfig) Validate() error {
	var errs []error
	u, err := url.Parse(c.URL)
	switch {
	case c.URL == "":
		errs = append(errs, errors.New("registry url is required"))
	case err != nil:
		errs = append(errs, fmt.Errorf("registry url: %w", err))
	case u.Scheme != "http" && u.Scheme != "https":
		errs = append(errs, fmt.Errorf("registry url %q: want http:// or https://", c.URL))
	case u.Host == "":
		errs = append(errs, fmt.Errorf("registry url %q has no host", c.URL))
	case u.User != nil:
		errs = append(errs, errors.New("registry url: put credentials in username and password, not in the url"))
	}
	if (c.Username == "") != (c.Password == "") {
		errs = append(errs, errors.New("registry username and password: set both or neither"))
	}
	if c.Username != "" && c.BearerToken != "" {
		errs = append(errs, errors.New("registry: set basic auth (username, password) or bearer_token, not both"))
	}
	if c.Timeout < 0 {
		errs = append(errs, fmt.Errorf("registry timeout %v is negative", c.Timeout))
	}
	if t := c.TLS; t != nil {
		if err == nil && u != nil && u.Scheme == "http" {
			errs = append(errs, errors.New("registry tls is set but the url is http://"))
		}
		if (t.CertFile == "") != (t.KeyFile == "") {
			errs = append(errs, errors.New("registry tls cert_file and key_file: set both or neither"))
		}
	}
	return errors.Join(errs...)
}

// REST is a Source backed by a registry's REST API, through franz-go's sr
// client. It caches nothing; put a Registry in front of it.
type REST struct {
	cl  *sr.Client
	url string
}

// NewREST returns a source for the registry cfg describes. It reads the TLS
// files now, so that a missing file is an error at startup.
func NewREST(cfg RegistryConfig) (*REST, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	timeout := cfg.Timeout
	if timeout == 0 {
		timeout = DefaultRegistryTimeout
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	if cfg.TLS != nil {
		tc, err := cfg.TLS.build()
		if err != nil {
			return nil, err
		}
		tr.TLSClientConfig = tc
	}
	opts := []sr.ClientOpt{
		sr.URLs(cfg.URL),
		sr.HTTPClient(&http.Client{Timeout: timeout, Transport: limitBody{tr}}),
		sr.UserAgent("strait"),
	}
	switch {
	case cfg.Username != "":
		opts = append(opts, sr.BasicAuth(cfg.Username, cfg.Password))
	case cfg.BearerToken != "":
		opts = append(opts, sr.BearerToken(cfg.BearerToken))
	}
	cl, err := sr.NewClient(opts...)
	if err != nil {
		return nil, fmt.Errorf("registry client: %w", err)
	}
	return &REST{cl: cl, url: cfg.URL}, nil
}

func (t *RegistryTLS) build() (*tls.Config, error) {
	tc := &tls.Config{
		MinVersion:         tls.VersionTLS12,
		ServerName:         t.ServerName,
		InsecureSkipVerify: t.InsecureSkipVerify, //nolint:gosec // opt-in, documented as for tests
	}
	if t.CAFile != "" {
		pem, err := os.ReadFile(t.CAFile)
		if err != nil {
			return nil, fmt.Errorf("registry tls ca_file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("registry tls ca_file %s: no PEM certificate in it", t.CAFile)
		}
		tc.RootCAs = pool
	}
	if t.CertFile != "" {
		cert, err := tls.LoadX509KeyPair(t.CertFile, t.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("registry tls cert_file/key_file: %w", err)
		}
		tc.Certificates = []tls.Certificate{cert}
	}
	return tc, nil
}

// limitBody fails a response body that grows past maxResponseBytes.
type limitBody struct{ rt http.RoundTripper }

func (l limitBody) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := l.rt.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	resp.Body = &limitedBody{rc: resp.Body, left: maxResponseBytes}
	return resp, nil
}

type limitedBody struct {
	rc   io.ReadCloser
	left int64
}

func (b *limitedBody) Read(p []byte) (int, error) {
	if b.left <= 0 {
		return 0, fmt.Errorf("registry response larger than %d bytes", maxResponseBytes)
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.rc.Read(p)
	b.left -= int64(n)
	return n, err
}

func (b *limitedBody) Close() error { return b.rc.Close() }

// SchemaByID implements Source: GET /schemas/ids/{id}.
func (r *REST) SchemaByID(ctx context.Context, id int) (Definition, error) {
	s, err := r.cl.SchemaByID(ctx, id)
	if err != nil {
		return Definition{}, r.classify(err, "schema id "+strconv.Itoa(id))
	}
	return definition(id, "", 0, s), nil
}

// SchemaByVersion implements Source: GET
// /subjects/{subject}/versions/{version|latest}.
func (r *REST) SchemaByVersion(ctx context.Context, subject string, version int) (Definition, error) {
	ss, err := r.cl.SchemaByVersion(ctx, subject, version)
	if err != nil {
		v := "latest"
		if version != Latest {
			v = strconv.Itoa(version)
		}
		return Definition{}, r.classify(err, fmt.Sprintf("subject %q version %s", subject, v))
	}
	return definition(ss.ID, ss.Subject, ss.Version, ss.Schema), nil
}

// SubjectVersionsByID implements Source: GET /schemas/ids/{id}/versions.
func (r *REST) SubjectVersionsByID(ctx context.Context, id int) ([]SubjectVersion, error) {
	vs, err := r.cl.SchemaVersionsByID(ctx, id)
	if err != nil {
		return nil, r.classify(err, "subjects of schema id "+strconv.Itoa(id))
	}
	out := make([]SubjectVersion, len(vs))
	for i, v := range vs {
		out[i] = SubjectVersion{Subject: v.Subject, Version: v.Version}
	}
	return out, nil
}

func definition(id int, subject string, version int, s sr.Schema) Definition {
	d := Definition{ID: id, Subject: subject, Version: version, Text: s.Schema}
	switch s.Type {
	case sr.TypeProtobuf:
		d.Format = Protobuf
	case sr.TypeJSON:
		d.Format = JSON
	default:
		d.Format = Avro
	}
	for _, ref := range s.References {
		d.References = append(d.References, Reference{Name: ref.Name, Subject: ref.Subject, Version: ref.Version})
	}
	return d
}

// The registry's not-found error codes: subject, version, schema, subject
// soft-deleted, version soft-deleted.
var notFoundCodes = map[int]bool{40401: true, 40402: true, 40403: true, 40404: true, 40406: true}

// classify turns an sr client error into ErrNotFound (only when the
// registry says so with one of its codes), ErrUnavailable (it could not
// answer), or a plain error.
func (r *REST) classify(err error, what string) error {
	var re *sr.ResponseError
	if !errors.As(err, &re) {
		// Transport failures, timeouts, cancellations and bodies that do
		// not decode: the registry could not give an answer.
		return newError(ErrUnavailable, "registry "+r.url+": looking up "+what, err)
	}
	detail := fmt.Errorf("HTTP %d, error code %d: %s", re.StatusCode, re.ErrorCode, re.Message)
	switch {
	case notFoundCodes[re.ErrorCode]:
		return newError(ErrNotFound, what+" not found", detail)
	case re.StatusCode == http.StatusUnauthorized || re.StatusCode == http.StatusForbidden:
		return newError(ErrUnavailable, "registry "+r.url+" refused our credentials looking up "+what, detail)
	case re.StatusCode == http.StatusNotFound:
		// A 404 without a registry code is a path the server does not
		// serve: a wrong base URL, not a missing schema, so it must not
		// make records fail for good.
		return newError(ErrUnavailable, "registry "+r.url+" does not serve the lookup of "+what+" (is the url the registry's base?)", detail)
	case re.StatusCode >= 500 || re.StatusCode == http.StatusTooManyRequests || re.StatusCode == http.StatusRequestTimeout:
		return newError(ErrUnavailable, "registry "+r.url+": looking up "+what, detail)
	}
	return fmt.Errorf("registry %s: looking up %s: %w", r.url, what, detail)
}

var _ Source = (*REST)(nil)
