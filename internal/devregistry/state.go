package devregistry

import (
	"encoding/json"
	"maps"
	"slices"
	"sort"
)

// Schema types as the API names them. A registration without schemaType is
// Avro, as in Confluent's registry.
const (
	typeAvro     = "AVRO"
	typeJSON     = "JSON"
	typeProtobuf = "PROTOBUF"
)

// schemaTypes is the answer to GET /schemas/types, in the order Confluent's
// registry lists them.
var schemaTypes = []string{typeJSON, typeProtobuf, typeAvro}

// defaultCompatibility is the global level of a fresh registry and the one
// DELETE /config restores, as in Confluent's registry.
const defaultCompatibility = "BACKWARD"

// reference names another registered schema that a schema uses: an Avro named
// type, a Protobuf import or a JSON Schema $ref.
type reference struct {
	Name    string `json:"name"`
	Subject string `json:"subject"`
	Version int    `json:"version"`
}

// schemaRec is one schema, under the global id it keeps for as long as any
// version of any subject (soft-deleted ones too) uses it. Its fields never
// change after registration, so clones of the state share them.
type schemaRec struct {
	ID         int         `json:"id"`
	Type       string      `json:"schemaType"`
	Schema     string      `json:"schema"`
	References []reference `json:"references,omitempty"`
}

// versionRec is one version of a subject.
type versionRec struct {
	Version int  `json:"version"`
	ID      int  `json:"id"`
	Deleted bool `json:"deleted,omitempty"`
}

// state is everything the registry knows. Writers change a clone and swap it
// in only once it is persisted, so a failed write changes nothing.
type state struct {
	// nextID is the id the next new schema gets. Ids are never reused, not
	// even after a permanent delete, so that a cached id cannot come to
	// mean another schema.
	nextID int
	// compatibility is the global level.
	compatibility string
	// subjectCompat holds the subject-level levels that were set.
	subjectCompat map[string]string
	schemas       map[int]schemaRec
	// subjects maps a subject to its versions in ascending order. A
	// subject with no versions left is removed.
	subjects map[string][]versionRec
	// byKey finds a schema's id from its identity (see schemaKey). It is
	// derived from schemas and not persisted.
	byKey map[string]int
}

func newState() *state {
	return &state{
		nextID:        1,
		compatibility: defaultCompatibility,
		subjectCompat: map[string]string{},
		schemas:       map[int]schemaRec{},
		subjects:      map[string][]versionRec{},
		byKey:         map[string]int{},
	}
}

// clone copies st deeply enough that changing the copy leaves st alone.
func (st *state) clone() *state {
	c := &state{
		nextID:        st.nextID,
		compatibility: st.compatibility,
		subjectCompat: maps.Clone(st.subjectCompat),
		schemas:       maps.Clone(st.schemas),
		subjects:      make(map[string][]versionRec, len(st.subjects)),
		byKey:         maps.Clone(st.byKey),
	}
	for s, vs := range st.subjects {
		c.subjects[s] = slices.Clone(vs)
	}
	return c
}

// schemaKey is a schema's identity: two registrations with the same type,
// canonical text and references are the same schema and share one id, across
// subjects too.
func schemaKey(typ, canonical string, refs []reference) string {
	if len(refs) == 0 {
		// nil and empty (as a hand-edited state file may have it) are
		// the same: no references.
		return typ + "\x00\x00" + canonical
	}
	r, _ := json.Marshal(refs) // a slice of plain structs always marshals
	return typ + "\x00" + string(r) + "\x00" + canonical
}

// liveVersions returns the subject's versions that are not soft-deleted, or
// all of them with deleted; only the soft-deleted ones with deletedOnly.
func liveVersions(vs []versionRec, deleted, deletedOnly bool) []versionRec {
	var out []versionRec
	for _, v := range vs {
		switch {
		case deletedOnly:
			if v.Deleted {
				out = append(out, v)
			}
		case deleted || !v.Deleted:
			out = append(out, v)
		}
	}
	return out
}

// findVersion returns the index in vs of version n (-1: the latest), counting
// soft-deleted versions only with deleted.
func findVersion(vs []versionRec, n int, deleted bool) (int, bool) {
	for i := len(vs) - 1; i >= 0; i-- {
		v := vs[i]
		if v.Deleted && !deleted {
			continue
		}
		if n == -1 || v.Version == n {
			return i, true
		}
	}
	return 0, false
}

// referencedBy returns the ids of the schemas that reference version v of
// subject, among those used by a version that is live (or, with deleted, any
// version), in ascending order.
func (st *state) referencedBy(subject string, v int, deleted bool) []int {
	used := map[int]bool{}
	for _, vs := range st.subjects {
		for _, vr := range vs {
			if deleted || !vr.Deleted {
				used[vr.ID] = true
			}
		}
	}
	var ids []int
	for id := range used {
		for _, r := range st.schemas[id].References {
			if r.Subject == subject && r.Version == v {
				ids = append(ids, id)
				break
			}
		}
	}
	sort.Ints(ids)
	return ids
}

// dropUnused removes the schemas no version uses any more.
func (st *state) dropUnused() {
	used := map[int]bool{}
	for _, vs := range st.subjects {
		for _, v := range vs {
			used[v.ID] = true
		}
	}
	for id, rec := range st.schemas {
		if !used[id] {
			delete(st.schemas, id)
			delete(st.byKey, schemaKey(rec.Type, rec.Schema, rec.References))
		}
	}
}
