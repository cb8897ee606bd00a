package devbroker

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The SaslHandshake workaround.
//
// kfake implements SaslHandshake v1 only and advertises it as v1..1. Kafka
// brokers advertise v0..1, and librdkafka 2.0.2 (Debian's kcat and
// confluent-kafka-python) refuses SASL against a broker whose range does not
// include v0 ("SASL Handshake not supported by broker"). With SASL enabled we
// therefore answer ApiVersions ourselves with kfake's table, SaslHandshake
// widened to v0..1. Clients still speak v1: every client that reads the table
// picks the highest version both sides have. A client that sends v0 anyway
// has its connection closed by kfake, as before.
//
// A kfake ControlKey function either answers a request or lets kfake answer
// it; it never sees kfake's response, so there is nothing to patch in place.
// Instead we learn kfake's answer once, from a throwaway in-memory kfake
// cluster, and serve a patched copy for every ordinary request. Requests kfake
// answers specially, we leave to kfake: a version above its maximum (KIP-511
// downgrade), an invalid client software name or version (INVALID_REQUEST),
// and a v5 request naming another cluster or node (KIP-1242, REBOOTSTRAP or
// INVALID_REQUEST). Those clients see kfake's unpatched answer, which is what
// they would have seen without the hook.
//
// Limits, as of kfake v0.0.0-20260918054303: the feature levels we serve are
// the ones a new cluster starts at, so an UpdateFeatures sent to the cluster
// is not reflected in ApiVersions while SASL is on; and a DataDir saved by a
// cluster with another cluster ID than ours makes v5 requests that name it
// fall through to kfake's unpatched answer (kgo sends those; librdkafka 2.0.2
// does not speak v5).

// apiVersionsTable is kfake's ApiVersions answer, SaslHandshake widened.
type apiVersionsTable struct {
	maxVersion             int16 // highest ApiVersions version kfake answers
	keys                   []kmsg.ApiVersionsResponseApiKey
	supportedFeatures      []kmsg.ApiVersionsResponseSupportedFeature
	finalizedFeatures      []kmsg.ApiVersionsResponseFinalizedFeature
	finalizedFeaturesEpoch int64
}

// kfake's table is built from package-level registrations, the same for every
// cluster in the process, so one successful probe serves them all.
var probed struct {
	mu sync.Mutex
	t  *apiVersionsTable
}

func probeAPIVersions() (*apiVersionsTable, error) {
	probed.mu.Lock()
	defer probed.mu.Unlock()
	if probed.t != nil {
		return probed.t, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	resp, err := askKfakeAPIVersions(ctx)
	if err != nil {
		return nil, fmt.Errorf("learning kfake's ApiVersions: %w", err)
	}
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		return nil, fmt.Errorf("learning kfake's ApiVersions: %w", err)
	}
	t := &apiVersionsTable{
		maxVersion:             -1,
		keys:                   resp.ApiKeys,
		supportedFeatures:      resp.SupportedFeatures,
		finalizedFeatures:      resp.FinalizedFeatures,
		finalizedFeaturesEpoch: resp.FinalizedFeaturesEpoch,
	}
	for i := range t.keys {
		switch k := &t.keys[i]; kmsg.Key(k.ApiKey) {
		case kmsg.ApiVersions:
			t.maxVersion = k.MaxVersion
		case kmsg.SASLHandshake:
			k.MinVersion = 0
		}
	}
	if t.maxVersion < 0 {
		return nil, errors.New("learning kfake's ApiVersions: kfake does not list ApiVersions itself")
	}
	probed.t = t
	return t, nil
}

// askKfakeAPIVersions asks a one-broker kfake cluster on an in-memory network
// for its ApiVersions, at the highest version kgo and kfake share.
func askKfakeAPIVersions(ctx context.Context) (*kmsg.ApiVersionsResponse, error) {
	var vnet kfake.VirtualNetwork
	const port = 9092 // a port of vnet, not of the host
	kf, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.Ports(port), kfake.ListenFn(vnet.Listen), kfake.ClusterID(clusterID))
	if err != nil {
		return nil, err
	}
	defer kf.Close()
	cl, err := kgo.NewClient(kgo.SeedBrokers(kf.ListenAddrs()...), kgo.Dialer(vnet.DialContext))
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	return kmsg.NewPtrApiVersionsRequest().RequestWith(ctx, cl)
}

// installSASLHandshakeFix must run right after kfake.NewCluster: the brokers
// accept connections from then on, and the first moments answer unpatched.
func installSASLHandshakeFix(kf *kfake.Cluster, t *apiVersionsTable) {
	kf.ControlKey(int16(kmsg.ApiVersions), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
		kf.KeepControl()
		req, ok := kreq.(*kmsg.ApiVersionsRequest)
		if !ok {
			return nil, nil, false
		}
		if resp := t.answer(req, kf.CurrentNode()); resp != nil {
			return resp, nil, true
		}
		return nil, nil, false
	})
}

// answer returns the response for req received by node, or nil if kfake
// should answer it.
func (t *apiVersionsTable) answer(req *kmsg.ApiVersionsRequest, node int32) *kmsg.ApiVersionsResponse {
	if req.Version < 0 || req.Version > t.maxVersion {
		return nil
	}
	if req.Version >= 3 && (!softwareNameRE.MatchString(req.ClientSoftwareName) || !softwareNameRE.MatchString(req.ClientSoftwareVersion)) {
		return nil
	}
	if req.Version >= 5 {
		hasCluster, hasNode := req.ClusterID != nil, req.NodeID != -1
		if hasCluster != hasNode || hasCluster && (*req.ClusterID != clusterID || req.NodeID != node) {
			return nil
		}
	}
	resp := req.ResponseKind().(*kmsg.ApiVersionsResponse)
	// Copies, because whoever holds a response may modify it.
	resp.ApiKeys = slices.Clone(t.keys)
	resp.SupportedFeatures = slices.Clone(t.supportedFeatures)
	resp.FinalizedFeatures = slices.Clone(t.finalizedFeatures)
	resp.FinalizedFeaturesEpoch = t.finalizedFeaturesEpoch
	return resp
}

// softwareNameRE is the pattern Kafka brokers (and kfake) require of
// ApiVersions v3+ ClientSoftwareName and ClientSoftwareVersion.
var softwareNameRE = regexp.MustCompile(`^[a-zA-Z0-9](?:[a-zA-Z0-9.-]*[a-zA-Z0-9])?$`)
