package devregistry

import (
	"fmt"
	"strings"

	"github.com/hamba/avro/v2"
)

// compatibilityLevels are the levels Confluent's registry defines.
var compatibilityLevels = map[string]bool{
	"NONE": true, "BACKWARD": true, "BACKWARD_TRANSITIVE": true,
	"FORWARD": true, "FORWARD_TRANSITIVE": true, "FULL": true, "FULL_TRANSITIVE": true,
}

// normalizeLevel returns the level in upper case if it is one, as Confluent's
// registry accepts levels in any case.
func normalizeLevel(l string) (string, error) {
	u := strings.ToUpper(l)
	if !compatibilityLevels[u] {
		return "", errInvalidCompatibility(l)
	}
	return u, nil
}

// levelFor returns the level that applies to subject: its own, or the global
// one.
func (st *state) levelFor(subject string) string {
	if l, ok := st.subjectCompat[subject]; ok {
		return l
	}
	return st.compatibility
}

// candidate is a schema being registered or checked.
type candidate struct {
	typ       string
	canonical string
	refs      []reference
}

// against returns the live versions of subject a new schema is checked
// against under level: none for NONE, every live version for the transitive
// levels, and the latest live version otherwise.
func (st *state) against(subject, level string) []versionRec {
	if level == "NONE" {
		return nil
	}
	live := liveVersions(st.subjects[subject], false, false)
	if len(live) == 0 || strings.HasSuffix(level, "_TRANSITIVE") {
		return live
	}
	return live[len(live)-1:]
}

// incompatibilities checks c against the given versions under level and
// returns one message per problem; none means compatible.
//
// Only Avro is checked for real, with hamba/avro's schema resolution rules.
// A JSON or Protobuf schema is compatible with any earlier schema of its own
// type: checking those needs the gateway's schema compilers, which this
// self-contained development registry does not import. A change of type is
// always incompatible, as in Confluent's registry.
func (st *state) incompatibilities(c candidate, level string, versions []versionRec) ([]string, error) {
	if level == "NONE" || len(versions) == 0 {
		return nil, nil
	}
	var (
		msgs   []string
		parsed avro.Schema
	)
	backward := strings.HasPrefix(level, "BACKWARD") || strings.HasPrefix(level, "FULL")
	forward := strings.HasPrefix(level, "FORWARD") || strings.HasPrefix(level, "FULL")
	for _, v := range versions {
		old := st.schemas[v.ID]
		if old.Type != c.typ {
			msgs = append(msgs, fmt.Sprintf("version %d is %s and the new schema is %s", v.Version, old.Type, c.typ))
			continue
		}
		if c.typ != typeAvro {
			continue
		}
		if parsed == nil {
			var err error
			if parsed, err = st.parseAvro(c.canonical, c.refs); err != nil {
				return nil, err
			}
		}
		prev, err := st.parseAvro(old.Schema, old.References)
		if err != nil {
			// Stored schemas parsed when they were registered;
			// failing now means the state is damaged.
			return nil, fmt.Errorf("parsing stored schema %d: %w", old.ID, err)
		}
		if backward {
			if err := compatible(parsed, prev); err != nil {
				msgs = append(msgs, fmt.Sprintf("the new schema cannot read data written with version %d (%s): %v", v.Version, level, err))
			}
		}
		if forward {
			if err := compatible(prev, parsed); err != nil {
				msgs = append(msgs, fmt.Sprintf("version %d cannot read data written with the new schema (%s): %v", v.Version, level, err))
			}
		}
	}
	return msgs, nil
}

// compatible reports whether data written with writer can be read with
// reader. It uses a fresh checker each time: hamba/avro's checker caches
// every pair it sees, which would grow without bound in a long-lived
// registry.
func compatible(reader, writer avro.Schema) (err error) {
	defer func() {
		// As in parseAvro: third-party code on client input answers
		// the request rather than ending the connection.
		if p := recover(); p != nil {
			err = fmt.Errorf("comparing the schemas failed: %v", p)
		}
	}()
	return avro.NewSchemaCompatibility().Compatible(reader, writer)
}
