package authz

import (
	"fmt"
	"reflect"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/straitgw/strait/internal/kafka/filter"
	"github.com/straitgw/strait/internal/kafka/wire"
)

// unknownMessage is the error message of a refused API key the filter
// does not check.
const unknownMessage = "this API is not allowed through the gateway"

// refuseUnknown answers a request of a key the filter does not check and
// the config does not let through, with CLUSTER_AUTHORIZATION_FAILED in
// the response's top-level error code, as a broker refuses a cluster API.
// An API whose response has no top-level error code at the request's
// version has no way to say no; its connection is closed instead, since
// an empty answer would read as success.
func (f *Filter) refuseUnknown(c *filter.Context, req *filter.Request) error {
	key, version := req.Header.Key, req.Header.Version
	countDecisions(c.VirtualCluster, 0, 1)
	principal := c.Principal()
	c.Logger().Warn("authorization denied",
		"principal", principal, "authenticated", principal != "",
		"api", wire.KeyName(key), "reason", "the filter does not check this API: list it in allow_unknown_keys to let it through unchecked")
	resp, ok := errorResponse(key, version, kerr.ClusterAuthorizationFailed.Code, unknownMessage)
	if !ok {
		return fmt.Errorf("authorization: refused %s v%d, whose response cannot carry an error; closing the connection (list it in allow_unknown_keys to let it through)", wire.KeyName(key), version)
	}
	req.Respond(resp)
	return nil
}

var stringPtr = reflect.TypeFor[*string]()

// errorResponse is key's response at version with its top-level error code
// set to code (and its error message, if it has one, to msg); ok is false
// when the response has no top-level error code at that version. Whether
// it has is found by encoding the response and reading it back, so no
// table of versions is kept by hand.
func errorResponse(key, version, code int16, msg string) (resp kmsg.Response, ok bool) {
	resp = kmsg.ResponseForKey(key)
	if resp == nil {
		return nil, false
	}
	resp.SetVersion(version)
	v := reflect.ValueOf(resp).Elem()
	ec := v.FieldByName("ErrorCode")
	if !ec.IsValid() || ec.Kind() != reflect.Int16 {
		return nil, false
	}
	ec.SetInt(int64(code))
	if em := v.FieldByName("ErrorMessage"); em.IsValid() && em.Type() == stringPtr {
		em.Set(reflect.ValueOf(&msg))
	}
	back := kmsg.ResponseForKey(key)
	back.SetVersion(version)
	if err := back.ReadFrom(resp.AppendTo(nil)); err != nil {
		return nil, false
	}
	if reflect.ValueOf(back).Elem().FieldByName("ErrorCode").Int() != int64(code) {
		return nil, false
	}
	return resp, true
}
