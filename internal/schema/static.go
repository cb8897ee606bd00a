package schema

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
)

// Static is a Source of fixed definitions: schemas written in the config or
// read from files. It never fails with ErrUnavailable.
type Static struct {
	byID      map[int]Definition
	bySubject map[string][]Definition // ascending versions
}

// NewStatic returns a source serving defs. Each definition needs an id, a
// subject, or both; an id names one schema (which may appear under several
// subjects), and a subject's versions must be unique. A
// definition with a subject and no version gets the version after the
// subject's previous one.
func NewStatic(defs []Definition) (*Static, error) {
	s := &Static{byID: map[int]Definition{}, bySubject: map[string][]Definition{}}
	var errs []error
	for i, d := range defs {
		where := "schema " + strconv.Itoa(i+1)
		if d.Subject != "" {
			where += " (subject " + strconv.Quote(d.Subject) + ")"
		}
		switch {
		case d.ID == 0 && d.Subject == "":
			errs = append(errs, fmt.Errorf("%s: needs an id, a subject or both", where))
			continue
		case d.ID < 0:
			errs = append(errs, fmt.Errorf("%s: id %d is negative", where, d.ID))
			continue
		case d.Format == 0:
			errs = append(errs, fmt.Errorf("%s: no format", where))
			continue
		}
		if d.ID != 0 {
			// One schema may be registered under several subjects, with
			// one id; two schemas may not share an id.
			if o, dup := s.byID[d.ID]; dup && (o.Text != d.Text || o.Format != d.Format) {
				errs = append(errs, fmt.Errorf("%s: id %d is given to two different schemas", where, d.ID))
				continue
			}
		}
		if d.Subject != "" {
			vs := s.bySubject[d.Subject]
			if d.Version == 0 {
				d.Version = 1
				if len(vs) > 0 {
					d.Version = vs[len(vs)-1].Version + 1
				}
			}
			if slices.ContainsFunc(vs, func(o Definition) bool { return o.Version == d.Version }) {
				errs = append(errs, fmt.Errorf("%s: version %d is given twice", where, d.Version))
				continue
			}
			vs = append(vs, d)
			slices.SortFunc(vs, func(a, b Definition) int { return a.Version - b.Version })
			s.bySubject[d.Subject] = vs
		}
		if d.ID != 0 {
			s.byID[d.ID] = d
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return s, nil
}

// all returns every definition once, in a stable order: those with ids by
// id, then those with only a subject.
func (s *Static) all() []Definition {
	var out []Definition
	for _, d := range s.byID {
		out = append(out, d)
	}
	slices.SortFunc(out, func(a, b Definition) int { return a.ID - b.ID })
	var subjects []string
	for subject := range s.bySubject {
		subjects = append(subjects, subject)
	}
	slices.Sort(subjects)
	for _, subject := range subjects {
		for _, d := range s.bySubject[subject] {
			if d.ID == 0 {
				out = append(out, d)
			}
		}
	}
	return out
}

// SchemaByID implements Source.
func (s *Static) SchemaByID(_ context.Context, id int) (Definition, error) {
	d, ok := s.byID[id]
	if !ok {
		return Definition{}, newError(ErrNotFound, "schema id "+strconv.Itoa(id)+" not found", nil)
	}
	d.Subject, d.Version = "", 0
	return d, nil
}

// SchemaByVersion implements Source.
func (s *Static) SchemaByVersion(_ context.Context, subject string, version int) (Definition, error) {
	vs := s.bySubject[subject]
	if len(vs) == 0 {
		return Definition{}, newError(ErrNotFound, "subject "+strconv.Quote(subject)+" not found", nil)
	}
	if version == Latest {
		return vs[len(vs)-1], nil
	}
	for _, d := range vs {
		if d.Version == version {
			return d, nil
		}
	}
	return Definition{}, newError(ErrNotFound, fmt.Sprintf("subject %q has no version %d", subject, version), nil)
}

// SubjectVersionsByID implements Source.
func (s *Static) SubjectVersionsByID(_ context.Context, id int) ([]SubjectVersion, error) {
	if _, ok := s.byID[id]; !ok {
		return nil, newError(ErrNotFound, "schema id "+strconv.Itoa(id)+" not found", nil)
	}
	var out []SubjectVersion
	for subject, vs := range s.bySubject {
		for _, d := range vs {
			if d.ID == id {
				out = append(out, SubjectVersion{Subject: subject, Version: d.Version})
			}
		}
	}
	slices.SortFunc(out, func(a, b SubjectVersion) int {
		if a.Subject != b.Subject {
			if a.Subject < b.Subject {
				return -1
			}
			return 1
		}
		return a.Version - b.Version
	})
	return out, nil
}

// Sources asks each source in turn: the first answer that is not
// ErrNotFound wins. If none has the schema and one was unavailable, the
// result is ErrUnavailable, since that one might have had it.
type Sources []Source

func firstOf[T any](ss Sources, ask func(Source) (T, error)) (T, error) {
	var zero T
	var unavailable, last error
	for _, s := range ss {
		v, err := ask(s)
		switch {
		case err == nil:
			return v, nil
		case errors.Is(err, ErrNotFound):
			last = err
		default:
			if errors.Is(err, ErrUnavailable) {
				if unavailable == nil {
					unavailable = err
				}
				continue
			}
			return zero, err
		}
	}
	if unavailable != nil {
		return zero, unavailable
	}
	if last == nil {
		last = newError(ErrNotFound, "no schema source is configured", nil)
	}
	return zero, last
}

// SchemaByID implements Source.
func (ss Sources) SchemaByID(ctx context.Context, id int) (Definition, error) {
	return firstOf(ss, func(s Source) (Definition, error) { return s.SchemaByID(ctx, id) })
}

// SchemaByVersion implements Source.
func (ss Sources) SchemaByVersion(ctx context.Context, subject string, version int) (Definition, error) {
	return firstOf(ss, func(s Source) (Definition, error) { return s.SchemaByVersion(ctx, subject, version) })
}

// SubjectVersionsByID implements Source.
func (ss Sources) SubjectVersionsByID(ctx context.Context, id int) ([]SubjectVersion, error) {
	return firstOf(ss, func(s Source) ([]SubjectVersion, error) { return s.SubjectVersionsByID(ctx, id) })
}

var (
	_ Source = (*Static)(nil)
	_ Source = Sources(nil)
)
