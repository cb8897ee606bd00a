package cli

// Every policy filter the gateway offers registers itself with
// internal/kafka/filter/registry when its package is linked in; this list
// is the one place a new filter is added to the binary.
import (
	_ "github.com/straitgw/strait/internal/kafka/filters/authz"
	_ "github.com/straitgw/strait/internal/kafka/filters/encryption"
	_ "github.com/straitgw/strait/internal/kafka/filters/fieldencryption"
	_ "github.com/straitgw/strait/internal/kafka/filters/validation"
)
