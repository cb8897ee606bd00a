// Package schema is the schema layer that every filter reading record
// structure builds on. It parses and writes the Confluent wire format (magic
// byte 0, a 4-byte schema id and, for Protobuf, a message-index list),
// fetches schemas from a source — inline or file definitions, or any
// registry speaking the Confluent Schema Registry REST API — caches them by
// id, compiles them with the codec of their format (subpackages avro,
// protobuf and jsonschema), maps topics to subjects with Confluent's
// subject-name strategies, and validates payloads against a Rule.
//
// A registry outage does not stop records whose schemas are cached; a
// lookup that needs the registry while it is down fails with an error that
// errors.Is matches against ErrUnavailable, distinct from ErrNotFound.
//
// It imports only its codec subpackages: never the proxy, the filter API,
// the CLI or the config.
package schema
