package schema

import "context"

// Latest is the version that stands for a subject's newest one.
const Latest = -1

// Reference names another schema that a schema uses: an Avro schema
// defining named types, an imported .proto file, or a JSON Schema that a
// $ref points at.
type Reference struct {
	// Name is how the schema refers to it: the Avro type's full name, the
	// import path, or the $ref URL.
	Name    string `json:"name" yaml:"name"`
	Subject string `json:"subject" yaml:"subject"`
	Version int    `json:"version" yaml:"version"`
}

// Definition is a schema as a source hands it over: text, not compiled.
type Definition struct {
	// ID is the schema's id; 0 for a definition that has none (an inline
	// schema used only by subject).
	ID int
	// Subject and Version are set when the definition was looked up by
	// subject; a lookup by id leaves them empty.
	Subject string
	Version int
	Format  Format
	Text    string
	// References come in the order the schema lists them.
	References []Reference
}

// SubjectVersion is one place a schema id is registered.
type SubjectVersion struct {
	Subject string `json:"subject"`
	Version int    `json:"version"`
}

// Source is where schemas come from: a Confluent-API registry (NewREST),
// definitions in the config or on disk (NewStatic), or several in turn
// (Sources). Errors match ErrNotFound or ErrUnavailable with errors.Is.
// Implementations must be safe for concurrent use.
type Source interface {
	// SchemaByID returns the schema with the given id.
	SchemaByID(ctx context.Context, id int) (Definition, error)
	// SchemaByVersion returns a subject's schema at version, or at its
	// newest version for Latest.
	SchemaByVersion(ctx context.Context, subject string, version int) (Definition, error)
	// SubjectVersionsByID lists where the schema with the given id is
	// registered.
	SubjectVersionsByID(ctx context.Context, id int) ([]SubjectVersion, error)
}
