package schema

import "fmt"

// Strategy maps a topic and a record to the subject its schema must be
// registered under, as Confluent's serializers do.
type Strategy uint8

const (
	// TopicName: <topic>-key or <topic>-value (the default).
	TopicName Strategy = iota
	// RecordName: the record type's fully-qualified name, for keys and
	// values alike.
	RecordName
	// TopicRecordName: <topic>-<fully-qualified record name>.
	TopicRecordName
)

func (s Strategy) String() string {
	switch s {
	case TopicName:
		return "topic-name"
	case RecordName:
		return "record-name"
	case TopicRecordName:
		return "topic-record-name"
	}
	return fmt.Sprintf("Strategy(%d)", s)
}

// ParseStrategy reads a strategy's name: topic-name (or empty),
// record-name, topic-record-name, or Confluent's class names
// TopicNameStrategy, RecordNameStrategy, TopicRecordNameStrategy.
func ParseStrategy(s string) (Strategy, error) {
	switch s {
	case "", "topic-name", "TopicNameStrategy":
		return TopicName, nil
	case "record-name", "RecordNameStrategy":
		return RecordName, nil
	case "topic-record-name", "TopicRecordNameStrategy":
		return TopicRecordName, nil
	}
	return 0, fmt.Errorf("unknown subject name strategy %q: want topic-name, record-name or topic-record-name", s)
}

// NeedsRecordName reports whether the strategy's subject depends on the
// record type, so that the schema must be known to name the subject.
func (s Strategy) NeedsRecordName() bool { return s != TopicName }

// Subject returns the subject for a record of topic (its key when isKey)
// whose type is recordName. recordName is unused by TopicName.
func (s Strategy) Subject(topic string, isKey bool, recordName string) string {
	switch s {
	case RecordName:
		return recordName
	case TopicRecordName:
		return topic + "-" + recordName
	}
	if isKey {
		return topic + "-key"
	}
	return topic + "-value"
}

// matches reports whether subject is what Subject returns, without
// building that string: it runs for every record.
func (s Strategy) matches(subject, topic string, isKey bool, recordName string) bool {
	switch s {
	case RecordName:
		return subject == recordName
	case TopicRecordName:
		return joined(subject, topic, recordName)
	}
	if isKey {
		return joined(subject, topic, "key")
	}
	return joined(subject, topic, "value")
}

// joined reports whether s == a + "-" + b.
func joined(s, a, b string) bool {
	return len(s) == len(a)+1+len(b) && s[:len(a)] == a && s[len(a)] == '-' && s[len(a)+1:] == b
}
