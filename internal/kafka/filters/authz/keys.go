package authz

import "github.com/straitgw/strait/internal/kafka/wire"

// handler checks one API key's requests.
type handler struct{}

// handlers are the API keys the filter checks, each with what it checks.
var handlers = map[int16]handler{}

// alwaysAllowed are the keys that name no resource: the version handshake
// and authentication itself, which the authentication stage handles
// before any filter.
func alwaysAllowed(key int16) bool {
	switch key {
	case wire.KeyApiVersions, wire.KeySASLHandshake, keySASLAuthenticate:
		return true
	}
	return false
}

const keySASLAuthenticate int16 = 36
