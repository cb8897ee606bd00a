package netedge

import (
	"strconv"
	"strings"
)

// NodeVar stands for a broker's node id in a host name pattern.
const NodeVar = "$(node)"

// NodeName matches host names against a pattern holding NodeVar once (e.g.
// broker-$(node).kafka.example.com), both ways: the name of node N, and the
// node a name stands for. Names compare without case, as DNS does.
type NodeName string

// Name is the name of node id.
func (p NodeName) Name(id int32) string {
	return strings.Replace(string(p), NodeVar, strconv.Itoa(int(id)), 1)
}

// Node returns the node id name stands for. Only the names Name gives
// match: no leading zeros, no sign, no trailing dot but DNS's root.
func (p NodeName) Node(name string) (int32, bool) {
	name = strings.ToLower(strings.TrimSuffix(name, "."))
	pattern := strings.ToLower(string(p))
	i := strings.Index(pattern, NodeVar)
	if i < 0 {
		return 0, false
	}
	prefix, suffix := pattern[:i], pattern[i+len(NodeVar):]
	if len(name) <= len(prefix)+len(suffix) || !strings.HasPrefix(name, prefix) || !strings.HasSuffix(name, suffix) {
		return 0, false
	}
	digits := name[len(prefix) : len(name)-len(suffix)]
	if len(digits) > 1 && digits[0] == '0' {
		return 0, false
	}
	id, err := strconv.ParseUint(digits, 10, 31)
	if err != nil {
		return 0, false
	}
	return int32(id), true
}
