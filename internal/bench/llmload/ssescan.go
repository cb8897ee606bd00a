package llmload

import "bytes"

// sseScan finds Server-Sent Events in a stream handed to it in chunks of
// any size, as HTTP/2 DATA frames arrive, without buffering the stream. It
// follows the framing rules of internal/llm/sse's Reader (LF, CRLF and CR
// line endings, a leading byte order mark, comment lines, multi-line data,
// blank lines between events skipped) but keeps only what the generator
// looks at: the event's name and the first keep bytes of its data, so a
// stream costs a few hundred bytes however long it is.
type sseScan struct {
	keep int // bytes of name and data kept per event; 0 means defaultKeep

	bomSeen int  // bytes of a leading byte order mark matched so far
	bomDone bool // the start of the stream has been checked for a mark
	afterCR bool // the last line ended with CR: an LF next is part of it
	phase   scanPhase
	field   [6]byte // the field name of the current line, if short
	fieldN  int     // its length so far (may exceed len(field))
	kind    fieldKind

	// The event being read.
	fields, comments int
	dataLines        int
	dataLen          int    // joined data length, kept or not
	data             []byte // the first keep bytes of the joined data
	hasName          bool
	nameLen          int
	name             []byte // the first keep bytes of the name
}

const defaultKeep = 4096

type scanPhase uint8

const (
	lineStart  scanPhase = iota
	inName               // reading a field name, up to ':' or the line end
	valueStart           // after ':', where one space is skipped
	inValue              // reading a field value up to the line end
	skipLine             // a comment line, or a field we ignore
)

type fieldKind uint8

const (
	otherField fieldKind = iota
	dataField
	eventField
)

// scanEvent is one event found by sseScan. Its slices are valid until the
// next call to scan.
type scanEvent struct {
	// Comment is true for a block of comment lines only (keep-alives).
	Comment bool
	// Name is the event: field (truncated to keep bytes; NameLen is whole).
	Name    []byte
	NameLen int
	// HasData is false for an event with no data: line. Data is the first
	// keep bytes of the data lines joined with "\n"; DataLen is the whole
	// length.
	HasData bool
	Data    []byte
	DataLen int
}

// named reports whether the event's name is exactly s.
func (e *scanEvent) named(s string) bool {
	return e.NameLen == len(s) && string(e.Name) == s
}

// dataIs reports whether the event's data is exactly s.
func (e *scanEvent) dataIs(s string) bool {
	return e.DataLen == len(s) && string(e.Data) == s
}

func (s *sseScan) limit() int {
	if s.keep > 0 {
		return s.keep
	}
	return defaultKeep
}

var bom = [3]byte{0xEF, 0xBB, 0xBF}

// scan reads p up to the end of the first event in it. It returns how many
// bytes it consumed and whether an event ended there (then read it with
// event). Call it again with the rest of p until p is consumed.
func (s *sseScan) scan(p []byte) (n int, ok bool) {
	if !s.bomDone {
		// A mark may be split across chunks: hold its bytes until it is
		// whole or ruled out.
		for n < len(p) && s.bomSeen < 3 && p[n] == bom[s.bomSeen] {
			s.bomSeen++
			n++
		}
		if s.bomSeen == 3 {
			s.bomDone = true
		} else if n < len(p) {
			s.bomDone = true
			if s.bomSeen > 0 {
				// Not a mark after all: its bytes start a field name.
				s.body(bom[:s.bomSeen])
			}
		} else {
			return n, false
		}
	}
	m, ok := s.body(p[n:])
	return n + m, ok
}

// body scans p as event-stream text.
func (s *sseScan) body(p []byte) (n int, ok bool) {
	for n < len(p) {
		if s.afterCR {
			s.afterCR = false
			if p[n] == '\n' {
				n++
				continue
			}
		}
		switch s.phase {
		case lineStart:
			switch c := p[n]; c {
			case '\n', '\r':
				n++
				s.afterCR = c == '\r'
				if s.fields == 0 && s.comments == 0 {
					continue // a blank line outside any event
				}
				return n, true
			case ':':
				s.comments++
				s.phase = skipLine
				n++
			default:
				s.phase, s.fieldN = inName, 0
			}
		case inName:
			i := n
			for i < len(p) && p[i] != ':' && p[i] != '\n' && p[i] != '\r' {
				if s.fieldN < len(s.field) {
					s.field[s.fieldN] = p[i]
				}
				s.fieldN++
				i++
			}
			n = i
			if i == len(p) {
				return n, false
			}
			s.fields++
			s.kind = otherField
			switch string(s.field[:min(s.fieldN, len(s.field))]) {
			case "data":
				if s.fieldN == 4 {
					s.kind = dataField
				}
			case "event":
				if s.fieldN == 5 {
					s.kind = eventField
				}
			}
			s.startValue()
			if p[i] == ':' {
				s.phase = valueStart
				n++
			} else {
				s.phase = inValue // an empty value: the line ends here
			}
		case valueStart:
			if p[n] == ' ' {
				n++
			}
			s.phase = inValue
		case inValue, skipLine:
			rest := p[n:]
			end := lineEnd(rest)
			if end < 0 {
				if s.phase == inValue {
					s.value(rest)
				}
				return len(p), false
			}
			if s.phase == inValue {
				s.value(rest[:end])
			}
			n += end + 1
			s.afterCR = rest[end] == '\r'
			s.phase = lineStart
		}
	}
	return n, false
}

// lineEnd returns the index of the first CR or LF in b, or -1.
func lineEnd(b []byte) int {
	lf := bytes.IndexByte(b, '\n')
	search := b
	if lf >= 0 {
		search = b[:lf]
	}
	if cr := bytes.IndexByte(search, '\r'); cr >= 0 {
		return cr
	}
	return lf
}

// startValue begins the value of a data: or event: line.
func (s *sseScan) startValue() {
	switch s.kind {
	case dataField:
		if s.dataLines > 0 {
			s.appendData([]byte{'\n'})
		}
		s.dataLines++
	case eventField:
		// The last event: line wins.
		s.hasName, s.nameLen, s.name = true, 0, s.name[:0]
	}
}

// value records part of the current line's value.
func (s *sseScan) value(v []byte) {
	switch s.kind {
	case dataField:
		s.appendData(v)
	case eventField:
		s.nameLen += len(v)
		if room := s.limit() - len(s.name); room > 0 {
			s.name = append(s.name, v[:min(room, len(v))]...)
		}
	}
}

func (s *sseScan) appendData(v []byte) {
	s.dataLen += len(v)
	if room := s.limit() - len(s.data); room > 0 {
		s.data = append(s.data, v[:min(room, len(v))]...)
	}
}

// event returns the event scan just ended and readies the scanner for the
// next one.
func (s *sseScan) event() scanEvent {
	ev := scanEvent{Comment: s.fields == 0}
	if !ev.Comment {
		if s.hasName {
			ev.Name, ev.NameLen = s.name, s.nameLen
		}
		if s.dataLines > 0 {
			ev.HasData, ev.Data, ev.DataLen = true, s.data, s.dataLen
		}
	}
	s.fields, s.comments, s.dataLines, s.dataLen = 0, 0, 0, 0
	s.data, s.name, s.hasName, s.nameLen = s.data[:0], s.name[:0], false, 0
	return ev
}

// reset readies the scanner for a new stream, keeping its buffers.
func (s *sseScan) reset() {
	*s = sseScan{keep: s.keep, data: s.data[:0], name: s.name[:0]}
}
