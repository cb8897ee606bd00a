package devregistry

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strings"
)

// Content types of the registry's API. Responses use the versioned type
// unless the client asks for plain JSON only.
const (
	contentTypeV1      = "application/vnd.schemaregistry.v1+json"
	contentTypeGeneric = "application/vnd.schemaregistry+json"
	contentTypeJSON    = "application/json"
)

// requestTypes are the request content types Confluent's registry accepts;
// any other is answered 415. A request without one is read as JSON.
var requestTypes = map[string]bool{
	contentTypeV1: true, contentTypeGeneric: true, contentTypeJSON: true, "application/octet-stream": true,
}

// ServeHTTP answers one API request.
func (r *Registry) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	segs, ok := splitPath(req.URL.EscapedPath())
	if !ok {
		writeError(w, req, &apiError{http.StatusNotFound, codeNotFound, "HTTP 404 Not Found"})
		return
	}
	h, allow := r.route(segs, req.Method)
	if h == nil {
		if allow == "" {
			writeError(w, req, &apiError{http.StatusNotFound, codeNotFound, "HTTP 404 Not Found"})
			return
		}
		w.Header().Set("Allow", allow)
		writeError(w, req, &apiError{http.StatusMethodNotAllowed, codeMethodNotAllowed, "HTTP 405 Method Not Allowed"})
		return
	}
	h(w, req)
}

// splitPath splits an escaped URL path into its unescaped segments, so that
// a subject holding "/" (sent as %2F) stays one segment. A trailing slash is
// ignored.
func splitPath(p string) ([]string, bool) {
	p = strings.Trim(p, "/")
	if p == "" {
		return nil, true
	}
	segs := strings.Split(p, "/")
	for i, s := range segs {
		u, err := url.PathUnescape(s)
		if err != nil {
			return nil, false
		}
		segs[i] = u
	}
	return segs, true
}

// route returns the handler of a path and method, or nil and the methods the
// path allows ("" for an unknown path).
func (r *Registry) route(segs []string, method string) (http.HandlerFunc, string) {
	type methods map[string]http.HandlerFunc
	var m methods
	n := len(segs)
	at := func(i int, lit string) bool { return n > i && segs[i] == lit }
	switch {
	case n == 0:
		m = methods{"GET": func(w http.ResponseWriter, req *http.Request) { writeJSON(w, req, http.StatusOK, struct{}{}) }}
	case n == 1 && at(0, "subjects"):
		m = methods{"GET": r.handleSubjects}
	case n == 2 && at(0, "subjects"):
		m = methods{"POST": r.handleLookup(segs[1]), "DELETE": r.handleDeleteSubject(segs[1])}
	case n == 3 && at(0, "subjects") && at(2, "versions"):
		m = methods{"GET": r.handleVersions(segs[1]), "POST": r.handleRegister(segs[1])}
	case n == 4 && at(0, "subjects") && at(2, "versions"):
		m = methods{"GET": r.handleVersion(segs[1], segs[3]), "DELETE": r.handleDeleteVersion(segs[1], segs[3])}
	case n == 5 && at(0, "subjects") && at(2, "versions") && at(4, "schema"):
		m = methods{"GET": r.handleVersionText(segs[1], segs[3])}
	case n == 5 && at(0, "subjects") && at(2, "versions") && at(4, "referencedby"):
		m = methods{"GET": r.handleReferencedBy(segs[1], segs[3])}
	case n == 1 && at(0, "schemas"):
		m = methods{"GET": r.handleAllSchemas}
	case n == 2 && at(0, "schemas") && at(1, "types"):
		m = methods{"GET": func(w http.ResponseWriter, req *http.Request) { writeJSON(w, req, http.StatusOK, schemaTypes) }}
	case n == 3 && at(0, "schemas") && at(1, "ids"):
		m = methods{"GET": r.handleSchemaByID(segs[2])}
	case n == 4 && at(0, "schemas") && at(1, "ids") && at(3, "schema"):
		m = methods{"GET": r.handleSchemaTextByID(segs[2])}
	case n == 4 && at(0, "schemas") && at(1, "ids") && at(3, "subjects"):
		m = methods{"GET": r.handleIDSubjects(segs[2])}
	case n == 4 && at(0, "schemas") && at(1, "ids") && at(3, "versions"):
		m = methods{"GET": r.handleIDVersions(segs[2])}
	case n == 1 && at(0, "config"):
		m = methods{"GET": r.handleGetConfig(""), "PUT": r.handlePutConfig(""), "DELETE": r.handleDeleteConfig("")}
	case n == 2 && at(0, "config"):
		m = methods{"GET": r.handleGetConfig(segs[1]), "PUT": r.handlePutConfig(segs[1]), "DELETE": r.handleDeleteConfig(segs[1])}
	case n == 1 && at(0, "mode"):
		m = methods{"GET": r.handleGetMode(""), "PUT": r.handlePutMode}
	case n == 2 && at(0, "mode"):
		m = methods{"GET": r.handleGetMode(segs[1])}
	case n == 4 && at(0, "compatibility") && at(1, "subjects") && at(3, "versions"):
		m = methods{"POST": r.handleCompatibility(segs[2], "")}
	case n == 5 && at(0, "compatibility") && at(1, "subjects") && at(3, "versions"):
		m = methods{"POST": r.handleCompatibility(segs[2], segs[4])}
	default:
		return nil, ""
	}
	if h, ok := m[method]; ok {
		return h, ""
	}
	if h, ok := m["GET"]; ok && method == http.MethodHead {
		return h, ""
	}
	var allow []string
	for _, k := range []string{"GET", "POST", "PUT", "DELETE"} {
		if _, ok := m[k]; ok {
			allow = append(allow, k)
		}
	}
	return nil, strings.Join(allow, ", ")
}

// queryBool reads a boolean query parameter the way Confluent's registry
// does: "true" in any case is true, anything else false.
func queryBool(req *http.Request, name string) bool {
	return strings.EqualFold(req.URL.Query().Get(name), "true")
}

// readBody decodes a JSON request body of at most maxBody bytes into v.
func (r *Registry) readBody(w http.ResponseWriter, req *http.Request, v any) error {
	if ct := req.Header.Get("Content-Type"); ct != "" {
		mt, _, err := mime.ParseMediaType(ct)
		if err != nil || !requestTypes[strings.ToLower(mt)] {
			return &apiError{http.StatusUnsupportedMediaType, codeUnsupportedMediaType,
				fmt.Sprintf("HTTP 415 Unsupported Media Type: send %s or %s", contentTypeV1, contentTypeJSON)}
		}
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, req.Body, r.maxBody))
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			return &apiError{http.StatusRequestEntityTooLarge, codeRequestEntityTooLarge,
				fmt.Sprintf("the request body is larger than the limit of %d bytes", r.maxBody)}
		}
		return errBadRequest("reading the request body: " + err.Error())
	}
	if len(bytes.TrimSpace(body)) == 0 {
		return errUnprocessable("the request body is empty; it should be a JSON object")
	}
	if err := json.Unmarshal(body, v); err != nil {
		var typeErr *json.UnmarshalTypeError
		if errors.As(err, &typeErr) {
			return errUnprocessable(fmt.Sprintf("the request body has a %s where %s belongs at %q", typeErr.Value, typeErr.Type, typeErr.Field))
		}
		return errBadRequest("the request body is not valid JSON: " + err.Error())
	}
	return nil
}

// responseType picks the response content type from the Accept header: plain
// JSON only for a client that accepts it and not the registry's own types.
func responseType(req *http.Request) string {
	accept := strings.ToLower(req.Header.Get("Accept"))
	if strings.Contains(accept, contentTypeJSON) && !strings.Contains(accept, "vnd.schemaregistry") {
		return contentTypeJSON
	}
	return contentTypeV1
}

func writeJSON(w http.ResponseWriter, req *http.Request, status int, v any) {
	data, err := json.Marshal(v)
	if err != nil {
		// Every value written here is plain data; this cannot happen
		// short of a programming error, which the client should see.
		status = http.StatusInternalServerError
		data = []byte(`{"error_code":500,"message":"encoding the response failed"}`)
	}
	w.Header().Set("Content-Type", responseType(req))
	w.WriteHeader(status)
	if req.Method != http.MethodHead {
		_, _ = w.Write(data)
	}
}

// writeText writes a schema's text unquoted, as the .../schema endpoints do.
func writeText(w http.ResponseWriter, req *http.Request, text string) {
	w.Header().Set("Content-Type", responseType(req))
	w.WriteHeader(http.StatusOK)
	if req.Method != http.MethodHead {
		_, _ = io.WriteString(w, text)
	}
}

// errorBody is the registry's error format.
type errorBody struct {
	ErrorCode int    `json:"error_code"`
	Message   string `json:"message"`
}

func writeError(w http.ResponseWriter, req *http.Request, err error) {
	var ae *apiError
	if !errors.As(err, &ae) {
		ae = &apiError{http.StatusInternalServerError, codeInternalServerError, "internal error: " + err.Error()}
	}
	writeJSON(w, req, ae.status, errorBody{ae.code, ae.msg})
}

// reply writes v, or err if there is one.
func reply(w http.ResponseWriter, req *http.Request, v any, err error) {
	if err != nil {
		writeError(w, req, err)
		return
	}
	writeJSON(w, req, http.StatusOK, v)
}

func (r *Registry) handleSubjects(w http.ResponseWriter, req *http.Request) {
	q := req.URL.Query()
	writeJSON(w, req, http.StatusOK, r.subjects(q.Get("subjectPrefix"), queryBool(req, "deleted"), queryBool(req, "deletedOnly")))
}

func (r *Registry) handleLookup(subject string) http.HandlerFunc {
	return func(w http.ResponseWriter, req *http.Request) {
		var body registerRequest
		if err := r.readBody(w, req, &body); err != nil {
			writeError(w, req, err)
			return
		}
		out, err := r.lookup(subject, &body, queryBool(req, "deleted"))
		reply(w, req, out, err)
	}
}

func (r *Registry) handleRegister(subject string) http.HandlerFunc {
	return func(w http.ResponseWriter, req *http.Request) {
		var body registerRequest
		if err := r.readBody(w, req, &body); err != nil {
			writeError(w, req, err)
			return
		}
		id, err := r.register(subject, &body)
		reply(w, req, struct {
			ID int `json:"id"`
		}{id}, err)
	}
}

func (r *Registry) handleDeleteSubject(subject string) http.HandlerFunc {
	return func(w http.ResponseWriter, req *http.Request) {
		out, err := r.deleteSubject(subject, queryBool(req, "permanent"))
		reply(w, req, out, err)
	}
}

func (r *Registry) handleVersions(subject string) http.HandlerFunc {
	return func(w http.ResponseWriter, req *http.Request) {
		out, err := r.versions(subject, queryBool(req, "deleted"), queryBool(req, "deletedOnly"))
		reply(w, req, out, err)
	}
}

func (r *Registry) handleVersion(subject, version string) http.HandlerFunc {
	return func(w http.ResponseWriter, req *http.Request) {
		out, err := r.version(subject, version, queryBool(req, "deleted"))
		reply(w, req, out, err)
	}
}

func (r *Registry) handleVersionText(subject, version string) http.HandlerFunc {
	return func(w http.ResponseWriter, req *http.Request) {
		out, err := r.version(subject, version, queryBool(req, "deleted"))
		if err != nil {
			writeError(w, req, err)
			return
		}
		writeText(w, req, out.Schema)
	}
}

func (r *Registry) handleReferencedBy(subject, version string) http.HandlerFunc {
	return func(w http.ResponseWriter, req *http.Request) {
		out, err := r.referencedBy(subject, version)
		reply(w, req, out, err)
	}
}

func (r *Registry) handleDeleteVersion(subject, version string) http.HandlerFunc {
	return func(w http.ResponseWriter, req *http.Request) {
		out, err := r.deleteVersion(subject, version, queryBool(req, "permanent"))
		reply(w, req, out, err)
	}
}

func (r *Registry) handleAllSchemas(w http.ResponseWriter, req *http.Request) {
	q := req.URL.Query()
	writeJSON(w, req, http.StatusOK, r.allSchemas(q.Get("subjectPrefix"), queryBool(req, "deleted"), queryBool(req, "latestOnly")))
}

func (r *Registry) handleSchemaByID(id string) http.HandlerFunc {
	return func(w http.ResponseWriter, req *http.Request) {
		out, err := r.schemaByID(id)
		reply(w, req, out, err)
	}
}

func (r *Registry) handleSchemaTextByID(id string) http.HandlerFunc {
	return func(w http.ResponseWriter, req *http.Request) {
		out, err := r.schemaByID(id)
		if err != nil {
			writeError(w, req, err)
			return
		}
		writeText(w, req, out.Schema)
	}
}

func (r *Registry) handleIDSubjects(id string) http.HandlerFunc {
	return func(w http.ResponseWriter, req *http.Request) {
		out, err := r.idSubjects(id, queryBool(req, "deleted"))
		reply(w, req, out, err)
	}
}

func (r *Registry) handleIDVersions(id string) http.HandlerFunc {
	return func(w http.ResponseWriter, req *http.Request) {
		out, err := r.idVersions(id, queryBool(req, "deleted"))
		reply(w, req, out, err)
	}
}

func (r *Registry) handleGetConfig(subject string) http.HandlerFunc {
	return func(w http.ResponseWriter, req *http.Request) {
		if subject == "" {
			writeJSON(w, req, http.StatusOK, config{r.globalLevel()})
			return
		}
		l, err := r.subjectLevel(subject, queryBool(req, "defaultToGlobal"))
		reply(w, req, config{l}, err)
	}
}

func (r *Registry) handlePutConfig(subject string) http.HandlerFunc {
	return func(w http.ResponseWriter, req *http.Request) {
		if subject != "" && !validSubject(subject) {
			writeError(w, req, errInvalidSubject(subject))
			return
		}
		var body configUpdate
		if err := r.readBody(w, req, &body); err != nil {
			writeError(w, req, err)
			return
		}
		l, err := r.setLevel(subject, body.Compatibility)
		reply(w, req, configUpdate{l}, err)
	}
}

func (r *Registry) handleDeleteConfig(subject string) http.HandlerFunc {
	return func(w http.ResponseWriter, req *http.Request) {
		prev, err := r.deleteLevel(subject)
		reply(w, req, config{prev}, err)
	}
}

// modeReadWrite is the only mode this registry has: it never turns read-only
// and has no IMPORT mode.
const modeReadWrite = "READWRITE"

type mode struct {
	Mode string `json:"mode"`
}

func (r *Registry) handleGetMode(subject string) http.HandlerFunc {
	return func(w http.ResponseWriter, req *http.Request) {
		if subject != "" && !queryBool(req, "defaultToGlobal") {
			writeError(w, req, &apiError{http.StatusNotFound, codeSubjectModeNotConfigured,
				fmt.Sprintf("subject %q does not have subject-level mode configured", subject)})
			return
		}
		writeJSON(w, req, http.StatusOK, mode{modeReadWrite})
	}
}

func (r *Registry) handlePutMode(w http.ResponseWriter, req *http.Request) {
	var body mode
	if err := r.readBody(w, req, &body); err != nil {
		writeError(w, req, err)
		return
	}
	if !strings.EqualFold(body.Mode, modeReadWrite) {
		writeError(w, req, &apiError{http.StatusUnprocessableEntity, codeInvalidMode,
			fmt.Sprintf("invalid mode %q: this development registry is always READWRITE", body.Mode)})
		return
	}
	writeJSON(w, req, http.StatusOK, mode{modeReadWrite})
}

func (r *Registry) handleCompatibility(subject, version string) http.HandlerFunc {
	return func(w http.ResponseWriter, req *http.Request) {
		var body registerRequest
		if err := r.readBody(w, req, &body); err != nil {
			writeError(w, req, err)
			return
		}
		out, err := r.checkCompatibility(subject, version, &body)
		if err != nil {
			writeError(w, req, err)
			return
		}
		if !queryBool(req, "verbose") {
			writeJSON(w, req, http.StatusOK, struct {
				IsCompatible bool `json:"is_compatible"`
			}{out.IsCompatible})
			return
		}
		if out.Messages == nil {
			out.Messages = []string{}
		}
		reply(w, req, out, err)
	}
}
