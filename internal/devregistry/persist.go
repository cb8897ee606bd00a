package devregistry

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
)

// stateFile is the file under the data directory that holds the state.
const stateFile = "registry.json"

// fileFormat is the version of the state file's layout. A file of another
// version is refused rather than misread.
const fileFormat = 1

// fileState is the state file's layout: the whole state, rewritten on every
// change. A development registry holds few enough schemas that this costs
// less than keeping a log, and a reader never has to replay anything.
type fileState struct {
	Format        int                     `json:"format"`
	NextID        int                     `json:"next_id"`
	Compatibility string                  `json:"compatibility"`
	SubjectCompat map[string]string       `json:"subject_compatibility,omitempty"`
	Schemas       []schemaRec             `json:"schemas"`
	Subjects      map[string][]versionRec `json:"subjects"`
}

// writeState replaces the state file atomically: a crash leaves either the
// old file or the new one, whole. The temporary file is synced before the
// rename and the directory after it, so the rename itself is durable.
func writeState(path string, st *state) error {
	data, err := encodeState(st)
	if err != nil {
		return err
	}
	dir := filepath.Dir(path)
	tmp, err := os.CreateTemp(dir, "."+stateFile+".*.tmp")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // fails harmlessly once renamed
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return err
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// encodeState returns the state file's bytes for st.
func encodeState(st *state) ([]byte, error) {
	fs := fileState{
		Format:        fileFormat,
		NextID:        st.nextID,
		Compatibility: st.compatibility,
		SubjectCompat: st.subjectCompat,
		Schemas:       make([]schemaRec, 0, len(st.schemas)),
		Subjects:      st.subjects,
	}
	for _, rec := range st.schemas {
		fs.Schemas = append(fs.Schemas, rec)
	}
	sort.Slice(fs.Schemas, func(i, j int) bool { return fs.Schemas[i].ID < fs.Schemas[j].ID })
	data, err := json.MarshalIndent(fs, "", " ")
	if err != nil {
		return nil, fmt.Errorf("encoding the state: %w", err)
	}
	return data, nil
}

// readState loads the state file; a missing file is an empty registry. A
// file that does not hold a consistent state is an error: serving a damaged
// registry would hand clients wrong schemas for their ids.
func readState(path string) (*state, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return newState(), nil
	}
	if err != nil {
		return nil, err
	}
	return decodeState(data)
}

// decodeState turns the state file's bytes into a state, checking every
// invariant the registry relies on.
func decodeState(data []byte) (*state, error) {
	var fs fileState
	if err := json.Unmarshal(data, &fs); err != nil {
		return nil, fmt.Errorf("decoding the state: %w", err)
	}
	if fs.Format != fileFormat {
		return nil, fmt.Errorf("state format %d is not the supported %d", fs.Format, fileFormat)
	}
	st := newState()
	if fs.NextID < 1 {
		return nil, fmt.Errorf("next_id %d is not positive", fs.NextID)
	}
	st.nextID = fs.NextID
	l, err := normalizeLevel(fs.Compatibility)
	if err != nil {
		return nil, fmt.Errorf("global compatibility: %w", err)
	}
	st.compatibility = l
	for s, level := range fs.SubjectCompat {
		l, err := normalizeLevel(level)
		if err != nil {
			return nil, fmt.Errorf("compatibility of subject %q: %w", s, err)
		}
		st.subjectCompat[s] = l
	}
	for _, rec := range fs.Schemas {
		switch {
		case rec.ID < 1 || rec.ID >= fs.NextID:
			return nil, fmt.Errorf("schema id %d is outside [1, next_id %d)", rec.ID, fs.NextID)
		case rec.Type != typeAvro && rec.Type != typeJSON && rec.Type != typeProtobuf:
			return nil, fmt.Errorf("schema %d has unknown type %q", rec.ID, rec.Type)
		case rec.Schema == "":
			return nil, fmt.Errorf("schema %d is empty", rec.ID)
		}
		if _, dup := st.schemas[rec.ID]; dup {
			return nil, fmt.Errorf("schema id %d appears twice", rec.ID)
		}
		key := schemaKey(rec.Type, rec.Schema, rec.References)
		if other, dup := st.byKey[key]; dup {
			return nil, fmt.Errorf("schemas %d and %d are the same schema", other, rec.ID)
		}
		st.schemas[rec.ID] = rec
		st.byKey[key] = rec.ID
	}
	for s, vs := range fs.Subjects {
		if !validSubject(s) {
			return nil, fmt.Errorf("subject %q is not a valid name", s)
		}
		if len(vs) == 0 {
			continue
		}
		for i, v := range vs {
			if v.Version < 1 || (i > 0 && v.Version <= vs[i-1].Version) {
				return nil, fmt.Errorf("subject %q: versions are not positive and ascending at %d", s, v.Version)
			}
			if _, ok := st.schemas[v.ID]; !ok {
				return nil, fmt.Errorf("subject %q version %d uses schema id %d, which is not stored", s, v.Version, v.ID)
			}
		}
		st.subjects[s] = vs
	}
	for _, rec := range st.schemas {
		for _, ref := range rec.References {
			if _, ok := findVersion(st.subjects[ref.Subject], ref.Version, true); !ok || ref.Version < 1 {
				return nil, fmt.Errorf("schema %d references version %d of subject %q, which is not stored", rec.ID, ref.Version, ref.Subject)
			}
		}
	}
	return st, nil
}
