package devregistry

import (
	"fmt"
	"log/slog"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"
)

// Registry is the registry's state and its HTTP API; it implements
// http.Handler. It is safe for concurrent use. Changes are serialized, and
// with a data directory each is on disk before it is answered.
type Registry struct {
	// mu guards st. Readers hold it shared; a writer holds it while it
	// builds and persists the next state, so that changes reach the disk
	// in the order they are answered.
	mu      sync.RWMutex
	st      *state
	file    string // the state file; "" keeps everything in memory
	log     *slog.Logger
	maxBody int64
}

// update runs fn on a copy of the state and, if fn reports a change, makes
// the copy the state once it is persisted. An error from fn or from the disk
// leaves the state as it was.
func (r *Registry) update(fn func(st *state) (changed bool, err error)) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	next := r.st.clone()
	changed, err := fn(next)
	if err != nil || !changed {
		return err
	}
	if r.file != "" {
		if err := writeState(r.file, next); err != nil {
			r.log.Error("schema registry: persisting a change failed; the change was not applied", "file", r.file, "err", err)
			return errStore(err)
		}
	}
	r.st = next
	return nil
}

// view runs fn with the current state, which fn must not change.
func (r *Registry) view(fn func(st *state) error) error {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return fn(r.st)
}

// registerRequest is the body of a registration, a lookup and a
// compatibility check. Metadata and rule sets (data contracts) are not
// supported and are ignored, like any unknown member.
type registerRequest struct {
	Schema     *string     `json:"schema"`
	SchemaType string      `json:"schemaType"`
	References []reference `json:"references"`
	// Version and ID ask for a given version or id, which Confluent's
	// registry grants only in IMPORT mode; see register.
	Version int `json:"version"`
	ID      int `json:"id"`
}

// prepare validates a request's schema and returns it in canonical form with
// its references resolved.
func (st *state) prepare(req *registerRequest) (candidate, error) {
	if req.Schema == nil || strings.TrimSpace(*req.Schema) == "" {
		return candidate{}, errInvalidSchema("the schema is empty")
	}
	typ, err := normalizeType(req.SchemaType)
	if err != nil {
		return candidate{}, err
	}
	canonical, err := canonicalText(typ, *req.Schema)
	if err != nil {
		return candidate{}, err
	}
	refs, err := st.resolveRefs(req.References)
	if err != nil {
		return candidate{}, err
	}
	if err := st.check(typ, canonical, refs); err != nil {
		return candidate{}, err
	}
	return candidate{typ: typ, canonical: canonical, refs: refs}, nil
}

// subjectSchema is a version of a subject as the API shows it. schemaType is
// left out for Avro and references when there are none, as Confluent's
// registry does (clients older than schema types expect exactly that).
type subjectSchema struct {
	Subject    string      `json:"subject"`
	Version    int         `json:"version"`
	ID         int         `json:"id"`
	SchemaType string      `json:"schemaType,omitempty"`
	References []reference `json:"references,omitempty"`
	Schema     string      `json:"schema"`
}

// idSchema is a schema by id as the API shows it.
type idSchema struct {
	SchemaType string      `json:"schemaType,omitempty"`
	References []reference `json:"references,omitempty"`
	Schema     string      `json:"schema"`
}

// subjectVersion is one use of a schema id.
type subjectVersion struct {
	Subject string `json:"subject"`
	Version int    `json:"version"`
}

func apiType(t string) string {
	if t == typeAvro {
		return ""
	}
	return t
}

func (st *state) subjectSchema(subject string, v versionRec) subjectSchema {
	rec := st.schemas[v.ID]
	return subjectSchema{
		Subject: subject, Version: v.Version, ID: v.ID,
		SchemaType: apiType(rec.Type), References: rec.References, Schema: rec.Schema,
	}
}

// parseVersion reads a version path segment: a number from 1 to 2^31-1, or
// "latest" (also -1), which it returns as -1.
func parseVersion(s string) (int, error) {
	t := strings.TrimSpace(s)
	if strings.EqualFold(t, "latest") {
		return -1, nil
	}
	n, err := strconv.ParseInt(t, 10, 32)
	if err != nil || (n <= 0 && n != -1) {
		return 0, errInvalidVersion(s)
	}
	return int(n), nil
}

// register adds the schema to subject and returns its id. A schema already
// live in the subject returns its id without a new version; a schema known
// under any subject gets its existing id.
func (r *Registry) register(subject string, req *registerRequest) (int, error) {
	if !validSubject(subject) {
		return 0, errInvalidSubject(subject)
	}
	var id, version int
	var typ string
	err := r.update(func(st *state) (bool, error) {
		c, err := st.prepare(req)
		if err != nil {
			return false, err
		}
		key := schemaKey(c.typ, c.canonical, c.refs)
		known, isKnown := st.byKey[key]
		vs := st.subjects[subject]
		if isKnown {
			for _, v := range vs {
				if !v.Deleted && v.ID == known {
					id = known
					return false, nil
				}
			}
		}
		// Asking for an id or a version is how schemas are copied
		// between registries, which Confluent's registry allows only in
		// IMPORT mode; this one has no modes but READWRITE.
		if req.ID > 0 && !(isKnown && req.ID == known) {
			return false, &apiError{http.StatusUnprocessableEntity, codeOperationNotPermitted,
				fmt.Sprintf("overwrite new schema with id %d is not permitted: this registry has no IMPORT mode and assigns ids itself", req.ID)}
		}
		next := 1
		if len(vs) > 0 {
			next = vs[len(vs)-1].Version + 1
		}
		if req.Version > 0 && req.Version != next {
			return false, &apiError{http.StatusUnprocessableEntity, codeInvalidVersion,
				fmt.Sprintf("version %d was asked for, but the next version of subject %q is %d", req.Version, subject, next)}
		}
		level := st.levelFor(subject)
		msgs, err := st.incompatibilities(c, level, st.against(subject, level))
		if err != nil {
			return false, err
		}
		if len(msgs) > 0 {
			return false, &apiError{http.StatusConflict, codeIncompatibleSchema,
				fmt.Sprintf("schema being registered is incompatible with an earlier schema for subject %q, details: %s", subject, strings.Join(msgs, "; "))}
		}
		if !isKnown {
			known = st.nextID
			st.nextID++
			st.schemas[known] = schemaRec{ID: known, Type: c.typ, Schema: c.canonical, References: c.refs}
			st.byKey[key] = known
		}
		st.subjects[subject] = append(vs, versionRec{Version: next, ID: known})
		id, version, typ = known, next, c.typ
		return true, nil
	})
	if err != nil {
		return 0, err
	}
	if version > 0 {
		r.log.Info("schema registered", "subject", subject, "version", version, "id", id, "type", typ)
	}
	return id, nil
}

// lookup finds the version of subject that holds the schema.
func (r *Registry) lookup(subject string, req *registerRequest, deleted bool) (out subjectSchema, err error) {
	err = r.view(func(st *state) error {
		vs := liveVersions(st.subjects[subject], deleted, false)
		if len(vs) == 0 {
			return errSubjectNotFound(subject)
		}
		c, err := st.prepare(req)
		if err != nil {
			return err
		}
		id, ok := st.byKey[schemaKey(c.typ, c.canonical, c.refs)]
		if ok {
			for i := len(vs) - 1; i >= 0; i-- {
				if vs[i].ID == id {
					out = st.subjectSchema(subject, vs[i])
					return nil
				}
			}
		}
		return errSchemaNotFound("not registered under subject " + strconv.Quote(subject))
	})
	return out, err
}

// subjects lists subjects with live versions (any versions with deleted,
// soft-deleted ones with deletedOnly) whose names start with prefix, sorted.
func (r *Registry) subjects(prefix string, deleted, deletedOnly bool) []string {
	out := []string{}
	_ = r.view(func(st *state) error {
		for s, vs := range st.subjects {
			if strings.HasPrefix(s, prefix) && len(liveVersions(vs, deleted, deletedOnly)) > 0 {
				out = append(out, s)
			}
		}
		return nil
	})
	sort.Strings(out)
	return out
}

// versions lists the version numbers of subject.
func (r *Registry) versions(subject string, deleted, deletedOnly bool) (out []int, err error) {
	err = r.view(func(st *state) error {
		if len(liveVersions(st.subjects[subject], deleted || deletedOnly, false)) == 0 {
			return errSubjectNotFound(subject)
		}
		out = []int{}
		for _, v := range liveVersions(st.subjects[subject], deleted, deletedOnly) {
			out = append(out, v.Version)
		}
		return nil
	})
	return out, err
}

// version returns one version of subject.
func (r *Registry) version(subject, version string, deleted bool) (out subjectSchema, err error) {
	n, err := parseVersion(version)
	if err != nil {
		return out, err
	}
	err = r.view(func(st *state) error {
		vs := st.subjects[subject]
		if len(liveVersions(vs, deleted, false)) == 0 {
			return errSubjectNotFound(subject)
		}
		i, ok := findVersion(vs, n, deleted)
		if !ok {
			return errVersionNotFound(n)
		}
		out = st.subjectSchema(subject, vs[i])
		return nil
	})
	return out, err
}

// referencedBy lists the ids of the schemas that reference a version.
func (r *Registry) referencedBy(subject, version string) (out []int, err error) {
	v, err := r.version(subject, version, true)
	if err != nil {
		return nil, err
	}
	_ = r.view(func(st *state) error {
		out = st.referencedBy(subject, v.Version, false)
		return nil
	})
	if out == nil {
		out = []int{}
	}
	return out, nil
}

// schemaByID returns the schema with the id. Soft-deleted versions keep
// their schema readable by id, so that data written with it still decodes.
func (r *Registry) schemaByID(id string) (out idSchema, err error) {
	err = r.view(func(st *state) error {
		rec, ok := st.schemaFromPath(id)
		if !ok {
			return errSchemaNotFound(id)
		}
		out = idSchema{SchemaType: apiType(rec.Type), References: rec.References, Schema: rec.Schema}
		return nil
	})
	return out, err
}

func (st *state) schemaFromPath(id string) (schemaRec, bool) {
	n, err := strconv.ParseInt(id, 10, 32)
	if err != nil {
		return schemaRec{}, false
	}
	rec, ok := st.schemas[int(n)]
	return rec, ok
}

// idVersions lists the subject versions that use a schema id, sorted.
func (r *Registry) idVersions(id string, deleted bool) (out []subjectVersion, err error) {
	err = r.view(func(st *state) error {
		rec, ok := st.schemaFromPath(id)
		if !ok {
			return errSchemaNotFound(id)
		}
		out = []subjectVersion{}
		for s, vs := range st.subjects {
			for _, v := range liveVersions(vs, deleted, false) {
				if v.ID == rec.ID {
					out = append(out, subjectVersion{s, v.Version})
				}
			}
		}
		return nil
	})
	sort.Slice(out, func(i, j int) bool {
		return out[i].Subject < out[j].Subject || out[i].Subject == out[j].Subject && out[i].Version < out[j].Version
	})
	return out, err
}

// idSubjects lists the subjects that use a schema id, sorted.
func (r *Registry) idSubjects(id string, deleted bool) ([]string, error) {
	svs, err := r.idVersions(id, deleted)
	if err != nil {
		return nil, err
	}
	out := []string{}
	for _, sv := range svs {
		if len(out) == 0 || out[len(out)-1] != sv.Subject {
			out = append(out, sv.Subject)
		}
	}
	return out, nil
}

// allSchemas lists every version of every subject whose name starts with
// prefix, or only each subject's latest with latestOnly.
func (r *Registry) allSchemas(prefix string, deleted, latestOnly bool) []subjectSchema {
	out := []subjectSchema{}
	_ = r.view(func(st *state) error {
		for s, vs := range st.subjects {
			if !strings.HasPrefix(s, prefix) {
				continue
			}
			live := liveVersions(vs, deleted, false)
			if latestOnly && len(live) > 0 {
				live = live[len(live)-1:]
			}
			for _, v := range live {
				out = append(out, st.subjectSchema(s, v))
			}
		}
		return nil
	})
	sort.Slice(out, func(i, j int) bool {
		return out[i].Subject < out[j].Subject || out[i].Subject == out[j].Subject && out[i].Version < out[j].Version
	})
	return out
}

// deleteSubject soft-deletes every live version of subject, or with
// permanent removes a subject whose versions are all soft-deleted, with its
// compatibility level. It returns the versions it deleted.
func (r *Registry) deleteSubject(subject string, permanent bool) (out []int, err error) {
	err = r.update(func(st *state) (bool, error) {
		vs := st.subjects[subject]
		if len(vs) == 0 {
			return false, errSubjectNotFound(subject)
		}
		live := liveVersions(vs, false, false)
		if !permanent && len(live) == 0 {
			return false, &apiError{http.StatusNotFound, codeSubjectSoftDeleted,
				fmt.Sprintf("subject %q was soft deleted; set permanent=true to delete it permanently", subject)}
		}
		if permanent && len(live) > 0 {
			return false, &apiError{http.StatusNotFound, codeSubjectNotSoftDeleted,
				fmt.Sprintf("subject %q was not soft deleted before being permanently deleted", subject)}
		}
		out = []int{}
		for i, v := range vs {
			if v.Deleted && !permanent {
				continue
			}
			if ids := st.referencedBy(subject, v.Version, permanent); len(ids) > 0 {
				return false, errReferenced(subject, v.Version, ids)
			}
			vs[i].Deleted = true
			out = append(out, v.Version)
		}
		if permanent {
			delete(st.subjects, subject)
			delete(st.subjectCompat, subject)
			st.dropUnused()
		}
		return true, nil
	})
	if err == nil {
		r.log.Info("subject deleted", "subject", subject, "versions", out, "permanent", permanent)
	}
	return out, err
}

// deleteVersion soft-deletes a live version, or with permanent removes a
// soft-deleted one. "latest" is the latest live version, or with permanent
// the latest version. It returns the version it deleted.
func (r *Registry) deleteVersion(subject, version string, permanent bool) (out int, err error) {
	n, err := parseVersion(version)
	if err != nil {
		return 0, err
	}
	err = r.update(func(st *state) (bool, error) {
		vs := st.subjects[subject]
		if len(vs) == 0 {
			return false, errSubjectNotFound(subject)
		}
		i, ok := findVersion(vs, n, n != -1 || permanent)
		if !ok {
			if n == -1 {
				return false, errLatestNotFound(subject)
			}
			return false, errVersionNotFound(n)
		}
		v := vs[i]
		if !permanent && v.Deleted {
			return false, &apiError{http.StatusNotFound, codeVersionSoftDeleted,
				fmt.Sprintf("version %d of subject %q was soft deleted; set permanent=true to delete it permanently", v.Version, subject)}
		}
		if permanent && !v.Deleted {
			return false, &apiError{http.StatusNotFound, codeVersionNotSoftDeleted,
				fmt.Sprintf("version %d of subject %q was not soft deleted before being permanently deleted", v.Version, subject)}
		}
		if ids := st.referencedBy(subject, v.Version, permanent); len(ids) > 0 {
			return false, errReferenced(subject, v.Version, ids)
		}
		if permanent {
			st.subjects[subject] = append(vs[:i:i], vs[i+1:]...)
			if len(st.subjects[subject]) == 0 {
				delete(st.subjects, subject)
			}
			st.dropUnused()
		} else {
			vs[i].Deleted = true
		}
		out = v.Version
		return true, nil
	})
	if err == nil {
		r.log.Info("schema version deleted", "subject", subject, "version", out, "permanent", permanent)
	}
	return out, err
}

// config is the body of GET and DELETE /config answers.
type config struct {
	CompatibilityLevel string `json:"compatibilityLevel"`
}

// configUpdate is the body of PUT /config, and of its answer.
type configUpdate struct {
	Compatibility string `json:"compatibility"`
}

func (r *Registry) globalLevel() (l string) {
	_ = r.view(func(st *state) error { l = st.compatibility; return nil })
	return l
}

// setLevel sets the global level (subject "") or a subject's. A subject needs
// no versions to have a level, as in Confluent's registry.
func (r *Registry) setLevel(subject, level string) (string, error) {
	l, err := normalizeLevel(level)
	if err != nil {
		return "", err
	}
	return l, r.update(func(st *state) (bool, error) {
		if subject == "" {
			st.compatibility = l
		} else {
			st.subjectCompat[subject] = l
		}
		return true, nil
	})
}

// subjectLevel returns the level set for subject, or the global level with
// defaultToGlobal when none is.
func (r *Registry) subjectLevel(subject string, defaultToGlobal bool) (l string, err error) {
	err = r.view(func(st *state) error {
		if sl, ok := st.subjectCompat[subject]; ok {
			l = sl
			return nil
		}
		if defaultToGlobal {
			l = st.compatibility
			return nil
		}
		return &apiError{http.StatusNotFound, codeSubjectCompatNotConfigured,
			fmt.Sprintf("subject %q does not have subject-level compatibility configured", subject)}
	})
	return l, err
}

// deleteLevel removes a subject's level, or resets the global level to
// BACKWARD for subject "", and returns the level it replaced.
func (r *Registry) deleteLevel(subject string) (prev string, err error) {
	err = r.update(func(st *state) (bool, error) {
		if subject == "" {
			prev = st.compatibility
			st.compatibility = defaultCompatibility
			return true, nil
		}
		l, ok := st.subjectCompat[subject]
		if !ok {
			return false, errSubjectNotFound(subject)
		}
		prev = l
		delete(st.subjectCompat, subject)
		return true, nil
	})
	return prev, err
}

// compatibilityResult is the answer of the compatibility endpoints.
type compatibilityResult struct {
	IsCompatible bool     `json:"is_compatible"`
	Messages     []string `json:"messages"`
}

// checkCompatibility checks a schema against one version of subject
// (version != ""), under the subject's level but against that version only,
// or (version == "") against the versions a registration would be checked
// against.
func (r *Registry) checkCompatibility(subject, version string, req *registerRequest) (out compatibilityResult, err error) {
	n := 0
	if version != "" {
		if n, err = parseVersion(version); err != nil {
			return out, err
		}
	}
	err = r.view(func(st *state) error {
		c, err := st.prepare(req)
		if err != nil {
			return err
		}
		level := st.levelFor(subject)
		against := st.against(subject, level)
		if version != "" {
			vs := st.subjects[subject]
			if len(liveVersions(vs, false, false)) == 0 {
				return errSubjectNotFound(subject)
			}
			i, ok := findVersion(vs, n, false)
			if !ok {
				return errVersionNotFound(n)
			}
			against = []versionRec{vs[i]}
		}
		msgs, err := st.incompatibilities(c, level, against)
		if err != nil {
			return err
		}
		out = compatibilityResult{IsCompatible: len(msgs) == 0, Messages: msgs}
		return nil
	})
	return out, err
}
