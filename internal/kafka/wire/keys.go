// Package wire is Strait's view of the Kafka wire format below the message
// bodies: frame sizes, request and response headers, which versions of which
// API keys Strait can read, and the few fields the proxy must read from an
// otherwise opaque frame (Produce acks, Fetch response tags). Full message
// bodies are franz-go's kmsg; this package adds what kmsg does not offer.
//
// It must import nothing of Strait's: everything else builds on it.
package wire

import "github.com/twmb/franz-go/pkg/kmsg"

// MaxKeys bounds the API key space Strait tracks. Keys at or beyond it are
// unknown to Strait and are never forwarded.
const MaxKeys = 128

// Well-known API keys the proxy itself must recognise.
const (
	KeyProduce          int16 = 0
	KeyFetch            int16 = 1
	KeyMetadata         int16 = 3
	KeyFindCoordinator  int16 = 10
	KeySASLHandshake    int16 = 17
	KeyApiVersions      int16 = 18
	KeySASLAuthenticate int16 = 36
	KeyDescribeCluster  int16 = 60
	KeyShareFetch       int16 = 78
	KeyShareAcknowledge int16 = 79
)

// keyInfo is what Strait knows of one API key, computed once from kmsg.
type keyInfo struct {
	known        bool
	maxVersion   int16
	flexibleFrom int16 // first flexible version; -1 if none is
	name         string
}

var keys [MaxKeys]keyInfo

func init() {
	for k := int16(0); k < MaxKeys; k++ {
		r := kmsg.RequestForKey(k)
		if r == nil {
			continue
		}
		ki := keyInfo{known: true, maxVersion: r.MaxVersion(), flexibleFrom: -1, name: kmsg.NameForKey(k)}
		for v := int16(0); v <= ki.maxVersion; v++ {
			r.SetVersion(v)
			if r.IsFlexible() {
				ki.flexibleFrom = v
				break
			}
		}
		keys[k] = ki
	}
}

// Known reports whether Strait can read the given key at the given version.
func Known(key, version int16) bool {
	if key < 0 || key >= MaxKeys || version < 0 {
		return false
	}
	ki := &keys[key]
	return ki.known && version <= ki.maxVersion
}

// KnownKey reports whether Strait knows the key at all.
func KnownKey(key int16) bool { return key >= 0 && key < MaxKeys && keys[key].known }

// MaxVersion returns the newest version Strait can read for key, or -1.
func MaxVersion(key int16) int16 {
	if !KnownKey(key) {
		return -1
	}
	return keys[key].maxVersion
}

// KeyName returns the API key's name, or "Unknown".
func KeyName(key int16) string {
	if KnownKey(key) {
		return keys[key].name
	}
	return "Unknown"
}

// Flexible reports whether the given key and version use flexible (KIP-482)
// encoding. The caller must have checked Known.
func Flexible(key, version int16) bool {
	ff := keys[key].flexibleFrom
	return ff >= 0 && version >= ff
}

// RequestHeaderFlexible reports whether the request header carries tagged
// fields (header v2).
func RequestHeaderFlexible(key, version int16) bool { return Flexible(key, version) }

// ResponseHeaderFlexible reports whether the response header carries tagged
// fields (header v1). ApiVersions responses never do, whatever their version:
// a client must be able to read the answer before it knows the broker's
// versions (KIP-511).
func ResponseHeaderFlexible(key, version int16) bool {
	return key != KeyApiVersions && Flexible(key, version)
}
