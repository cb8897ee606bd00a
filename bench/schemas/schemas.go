// Package schemas holds the benchmark's reference record schemas (Avro,
// Protobuf, JSON Schema) so that the load generator, the field-encryption
// filters' tests and users' own tools read the same files.
package schemas

import _ "embed"

// Avro is the reference record's Avro schema (record.avsc).
//
//go:embed record.avsc
var Avro string

// Proto is the reference record's Protobuf definition (record.proto). Its
// field numbers are id=1, status=2, ssn=3, notes=4, all strings.
//
//go:embed record.proto
var Proto string

// JSONSchema is the reference record's JSON Schema (record.schema.json).
//
//go:embed record.schema.json
var JSONSchema string
