package schema

import (
	"fmt"
	"strings"
)

// Format is a schema language.
type Format uint8

// The formats, with the names a registry gives them in schemaType.
const (
	Avro Format = iota + 1
	Protobuf
	JSON
)

func (f Format) String() string {
	switch f {
	case Avro:
		return "AVRO"
	case Protobuf:
		return "PROTOBUF"
	case JSON:
		return "JSON"
	}
	return fmt.Sprintf("Format(%d)", f)
}

// ParseFormat reads a registry's schemaType, in any case. Empty means Avro,
// as the registry API defines for a schema without schemaType.
func ParseFormat(s string) (Format, error) {
	switch strings.ToUpper(s) {
	case "", "AVRO":
		return Avro, nil
	case "PROTOBUF":
		return Protobuf, nil
	case "JSON":
		return JSON, nil
	}
	return 0, fmt.Errorf("unknown schema type %q: want AVRO, PROTOBUF or JSON", s)
}
