package server

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/tally-analytics/tally/fault"
)

// adminBodyLimit caps the JSON bodies of tenancy requests, which are tiny.
const adminBodyLimit = 64 << 10

// readBody reads at most limit bytes of r's body; a larger body is 413
// payload_too_large.
func readBody(w http.ResponseWriter, r *http.Request, limit int64) ([]byte, error) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	var tooBig *http.MaxBytesError
	if errors.As(err, &tooBig) {
		return nil, fault.Errorf(fault.PayloadTooLarge, "request body is larger than %d bytes", limit)
	}
	if err != nil {
		return nil, fault.Errorf(fault.InvalidJSON, "could not read the request body")
	}
	return body, nil
}

// object is a decoded JSON object whose fields are read one by one, so that
// a field of the wrong type gets that field's own error code.
type object map[string]json.RawMessage

// decodeObject reads a JSON object body; anything else is 400 invalid_json.
func decodeObject(w http.ResponseWriter, r *http.Request, limit int64) (object, error) {
	body, err := readBody(w, r, limit)
	if err != nil {
		return nil, err
	}
	var obj object
	if err := json.Unmarshal(body, &obj); err != nil || obj == nil {
		return nil, fault.Errorf(fault.InvalidJSON, "request body must be a JSON object")
	}
	return obj, nil
}

// fieldError is a 4xx about one field of the body: its detail's path (a
// JSON Pointer) names the field, so a form shows the message beside it
// (docs/dashboard.md#settings).
func fieldError(code, key, msg string) *fault.Error {
	return fault.WithDetails(code, msg, []fault.Detail{{Path: "/" + key, Message: msg}})
}

// has reports whether the object carries key.
func (o object) has(key string) bool {
	_, ok := o[key]
	return ok
}

// str returns the string field key, or an error with code when it is
// missing or not a string.
func (o object) str(key, code string) (string, error) {
	raw, ok := o[key]
	var s string
	if !ok || json.Unmarshal(raw, &s) != nil {
		return "", fieldError(code, key, key+" is required and must be a string")
	}
	return s, nil
}

// strings returns the string-array field key, or an error with code.
func (o object) strings(key, code string) ([]string, error) {
	raw, ok := o[key]
	var list []string
	if !ok || json.Unmarshal(raw, &list) != nil {
		return nil, fieldError(code, key, key+" is required and must be an array of strings")
	}
	return list, nil
}

// limitParam parses the limit query parameter: def when absent, else an
// integer in [1, most] or 400 invalid_limit.
func limitParam(r *http.Request, def, most int) (int, error) {
	v := r.URL.Query().Get("limit")
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > most {
		return 0, fault.Errorf(fault.InvalidLimit, "limit must be an integer from 1 to %d", most)
	}
	return n, nil
}

// timeParam parses an ISO 8601 timestamp query parameter (zero when
// absent), or 400 invalid_cursor.
func timeParam(r *http.Request, name string) (time.Time, error) {
	v := r.URL.Query().Get(name)
	if v == "" {
		return time.Time{}, nil
	}
	t, err := time.Parse(time.RFC3339Nano, v)
	if err != nil {
		return time.Time{}, fault.Errorf(fault.InvalidCursor, "%s must be an ISO 8601 timestamp such as 2026-01-31T09:05:00.120Z", name)
	}
	return t, nil
}

// pageParams reads the paging parameters of a list: limit (1-1000, default
// 100) and the exclusive timestamp cursor named cursorName.
func pageParams(r *http.Request, cursorName string) (limit int, cursor time.Time, err error) {
	if limit, err = limitParam(r, 100, 1000); err != nil {
		return 0, cursor, err
	}
	cursor, err = timeParam(r, cursorName)
	return limit, cursor, err
}
