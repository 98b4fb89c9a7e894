package server

import (
	"bufio"
	"bytes"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"unicode/utf8"

	"github.com/julienschmidt/httprouter"

	"github.com/tally-analytics/tally/fault"
)

// sourcemapMaxDecoded is the largest map accepted, decoded (25 MiB).
const sourcemapMaxDecoded = 25 << 20

// sourcemapMaxBody bounds the request body: the base64 of the largest map
// plus room for the other fields.
const sourcemapMaxBody = sourcemapMaxDecoded/3*4 + 4 + 64<<10

var errMapTooLarge = fault.Errorf(fault.PayloadTooLarge, "the decoded map is larger than 25 MiB")

// uploadSourcemap takes {release, file, map (base64)} and answers 201
// {size}, the decoded byte count. The bearer must be the site id: any
// other bearer is 401 whether or not the site exists, so site ids cannot be
// probed. The body is parsed as a stream and the map decoded as it is read,
// so only the decoded map is ever held in memory.
//
// POST /sites/:siteId/sourcemaps
func (s *Server) uploadSourcemap(w http.ResponseWriter, r *http.Request, ps httprouter.Params) error {
	siteID := ps.ByName("siteId")
	token, ok := bearer(r)
	if !ok || subtle.ConstantTimeCompare([]byte(token), []byte(siteID)) != 1 {
		return fault.Errorf(fault.Unauthorized, "send Authorization: Bearer <site id> of this site")
	}
	if _, ok := s.db.Site(siteID); !ok {
		return errNotFound
	}
	up, err := parseSourcemap(http.MaxBytesReader(w, r.Body, sourcemapMaxBody), r.ContentLength)
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return fault.Errorf(fault.PayloadTooLarge, "the body is larger than a 25 MiB map can be")
		}
		return err
	}
	if err := s.db.UpsertSourcemap(r.Context(), siteID, up.release, up.file, up.data); err != nil {
		return err
	}
	writeJSON(w, http.StatusCreated, map[string]any{"size": len(up.data)})
	return nil
}

type sourcemapUpload struct {
	release, file string
	data          []byte
	hasMap        bool
}

// parseSourcemap reads {"release": s, "file": s, "map": base64} from r.
// Unknown fields are skipped. size is the body's length when known (else
// -1); it sizes the decoded map's buffer once instead of by doubling.
func parseSourcemap(r io.Reader, size int64) (*sourcemapUpload, error) {
	js := &jsonStream{r: bufio.NewReaderSize(r, 64<<10), hint: size / 4 * 3}
	up := &sourcemapUpload{}
	if c, err := js.next(); err != nil || c != '{' {
		return nil, js.syntax(err)
	}
	seen := map[string]bool{}
	for first := true; ; first = false {
		c, err := js.next()
		if err != nil {
			return nil, js.syntax(err)
		}
		if c == '}' && first {
			break
		}
		if c != '"' {
			return nil, js.syntax(nil)
		}
		key, err := js.smallString()
		if err != nil {
			return nil, err
		}
		if c, err := js.next(); err != nil || c != ':' {
			return nil, js.syntax(err)
		}
		if seen[key] {
			return nil, fault.Errorf(fault.InvalidSourcemap, "the field %q appears twice", key)
		}
		seen[key] = true
		c, err = js.next()
		if err != nil {
			return nil, js.syntax(err)
		}
		switch key {
		case "release", "file":
			if c != '"' {
				return nil, fault.Errorf(fault.InvalidSourcemap, "%s must be a string", key)
			}
			v, err := js.smallString()
			if err != nil {
				return nil, err
			}
			if key == "release" {
				up.release = v
			} else {
				up.file = v
			}
		case "map":
			if c != '"' {
				return nil, fault.Errorf(fault.InvalidSourcemap, "map must be a base64 string")
			}
			if up.data, err = js.base64String(); err != nil {
				return nil, err
			}
			up.hasMap = true
		default:
			if err := js.skip(c); err != nil {
				return nil, err
			}
		}
		c, err = js.next()
		if err != nil {
			return nil, js.syntax(err)
		}
		if c == '}' {
			break
		}
		if c != ',' {
			return nil, js.syntax(nil)
		}
	}
	if c, err := js.next(); err != io.EOF {
		_ = c
		return nil, js.syntax(err)
	}
	if n := utf8.RuneCountInString(up.release); n < 1 || n > 128 {
		return nil, fault.Errorf(fault.InvalidSourcemap, "release must be 1 to 128 characters")
	}
	if f := up.file; f == "" || len(f) > 255 || strings.ContainsAny(f, `/\`) || f == "." || f == ".." {
		return nil, fault.Errorf(fault.InvalidSourcemap, "file must be the base name of a script file, such as app.min.js")
	}
	if !up.hasMap {
		return nil, fault.Errorf(fault.InvalidSourcemap, "map is required, as base64")
	}
	return up, nil
}

// jsonStream reads the few JSON shapes a sourcemap upload needs without
// holding the whole body.
type jsonStream struct {
	r    *bufio.Reader
	hint int64 // expected decoded size of the map, 0 when unknown
}

// next returns the next byte that is not white space.
func (js *jsonStream) next() (byte, error) {
	for {
		c, err := js.r.ReadByte()
		if err != nil {
			return 0, err
		}
		if c != ' ' && c != '\t' && c != '\n' && c != '\r' {
			return c, nil
		}
	}
}

// syntax turns a read failure into the right answer: the body cap's error
// passes through (413), anything else is 400 invalid_json.
func (js *jsonStream) syntax(err error) error {
	var tooBig *http.MaxBytesError
	if errors.As(err, &tooBig) {
		return err
	}
	return fault.Errorf(fault.InvalidJSON, "the body must be a JSON object {\"release\", \"file\", \"map\"}")
}

// smallString reads the rest of a string (its opening quote consumed) of
// at most 4 KiB and unescapes it.
func (js *jsonStream) smallString() (string, error) {
	var raw bytes.Buffer
	raw.WriteByte('"')
	escaped := false
	for {
		c, err := js.r.ReadByte()
		if err != nil {
			return "", js.syntax(err)
		}
		raw.WriteByte(c)
		if raw.Len() > 4<<10 {
			return "", fault.Errorf(fault.InvalidSourcemap, "a field is longer than 4 KiB")
		}
		switch {
		case escaped:
			escaped = false
		case c == '\\':
			escaped = true
		case c == '"':
			var s string
			if err := json.Unmarshal(raw.Bytes(), &s); err != nil {
				return "", js.syntax(nil)
			}
			return s, nil
		}
	}
}

// base64String decodes the rest of a string (opening quote consumed) as
// standard base64 while reading it, up to sourcemapMaxDecoded bytes.
func (js *jsonStream) base64String() ([]byte, error) {
	content := &stringContent{r: js.r}
	dec := base64.NewDecoder(base64.StdEncoding, content)
	var buf bytes.Buffer
	buf.Grow(int(min(max(js.hint, 0), sourcemapMaxDecoded)) + bytes.MinRead)
	_, err := buf.ReadFrom(io.LimitReader(dec, sourcemapMaxDecoded+1))
	data := buf.Bytes()
	if content.err != nil {
		if errors.Is(content.err, errBadEscape) {
			return nil, fault.Errorf(fault.InvalidSourcemap, "map must be plain base64")
		}
		return nil, js.syntax(content.err)
	}
	if err != nil {
		return nil, fault.Errorf(fault.InvalidSourcemap, "map is not valid base64: %v", err)
	}
	if len(data) > sourcemapMaxDecoded {
		return nil, errMapTooLarge
	}
	// The decoder stops at padding: anything after it in the string is bad.
	if rest, err := io.ReadAll(content); err != nil || len(bytes.TrimSpace(rest)) > 0 {
		return nil, fault.Errorf(fault.InvalidSourcemap, "map is not valid base64: data after the padding")
	}
	return data, nil
}

var errBadEscape = errors.New("bad escape in base64 string")

// stringContent yields a JSON string's content up to its closing quote.
// Base64 needs no escapes; "\/" (a legal escape of '/') and "\n", "\r"
// (line breaks, which the decoder skips) are allowed.
type stringContent struct {
	r    *bufio.Reader
	done bool
	err  error
}

// Read implements io.Reader over the string's content, undoing the allowed
// escapes.
func (sc *stringContent) Read(p []byte) (int, error) {
	if sc.done {
		return 0, io.EOF
	}
	n := 0
	for n < len(p) {
		c, err := sc.r.ReadByte()
		if err != nil {
			sc.err = err
			return n, err
		}
		switch c {
		case '"':
			sc.done = true
			if n == 0 {
				return 0, io.EOF
			}
			return n, nil
		case '\\':
			e, err := sc.r.ReadByte()
			if err != nil {
				sc.err = err
				return n, err
			}
			switch e {
			case '/':
				c = '/'
			case 'n':
				c = '\n'
			case 'r':
				c = '\r'
			default:
				sc.err = errBadEscape
				return n, errBadEscape
			}
		}
		p[n] = c
		n++
	}
	return n, nil
}

// skip reads past one JSON value whose first byte is c.
func (js *jsonStream) skip(c byte) error {
	depth := 0
	inString := c == '"'
	escaped := false
	if c == '{' || c == '[' {
		depth = 1
	} else if !inString {
		// a number or literal: read until a delimiter
		for {
			b, err := js.r.ReadByte()
			if err != nil {
				return js.syntax(err)
			}
			if b == ',' || b == '}' || b == ']' || b == ' ' || b == '\n' || b == '\t' || b == '\r' {
				return js.r.UnreadByte()
			}
		}
	}
	for inString || depth > 0 {
		b, err := js.r.ReadByte()
		if err != nil {
			return js.syntax(err)
		}
		switch {
		case inString && escaped:
			escaped = false
		case inString && b == '\\':
			escaped = true
		case inString && b == '"':
			inString = false
		case inString:
		case b == '"':
			inString = true
		case b == '{' || b == '[':
			depth++
		case b == '}' || b == ']':
			depth--
		}
	}
	return nil
}
