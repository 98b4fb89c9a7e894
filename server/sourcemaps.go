package server

import (
	"bufio"
	"bytes"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"unicode/utf8"

	"github.com/julienschmidt/httprouter"

	"github.com/tally-analytics/tally/fault"
	"github.com/tally-analytics/tally/storage"
)

// sourcemapMaxDecoded is the largest map accepted, decoded (25 MiB).
const sourcemapMaxDecoded = 25 << 20

// sourcemapMaxBody bounds the request body: the base64 of the largest map
// plus room for the other fields.
const sourcemapMaxBody = sourcemapMaxDecoded/3*4 + 4 + 64<<10

var errMapTooLarge = fault.Errorf(fault.PayloadTooLarge, "the decoded map is larger than 25 MiB")

// sourcemapChunk is the largest piece by which an upload's map buffers grow
// (see readChunked): memory follows the bytes that actually arrived, never
// the Content-Length a client declares, so slow clients cannot pin memory
// they do not fill. Each piece is one part in storage, so it is no larger
// than a part may be.
const sourcemapChunk = storage.SourcemapPartMax

// uploadSourcemap takes {release, file, map (base64)} and answers 201
// {size}, the decoded byte count. The credential is the collector's (see
// sourcemapSite); each site may upload a few maps a minute and store a
// bounded number of files and bytes. The body is parsed as a stream and the
// map decoded as it is read, so only the decoded map is ever held in memory,
// in pieces that storage writes as they are, one writer job each.
//
// POST /sites/:siteId/sourcemaps
func (s *Server) uploadSourcemap(w http.ResponseWriter, r *http.Request, ps httprouter.Params) error {
	site, err := s.sourcemapSite(r, ps.ByName("siteId"))
	if err != nil {
		return err
	}
	if ok, wait := s.uploads.take(site.ID, 1, s.now()); !ok {
		return &fault.Error{Code: fault.RateLimited, RetryAfter: wait,
			Message: fmt.Sprintf("at most %d sourcemap uploads per minute for this site, try again later", s.cfg.SourcemapUploadsPerMinute)}
	}
	up, err := parseSourcemap(http.MaxBytesReader(w, r.Body, sourcemapMaxBody))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return fault.Errorf(fault.PayloadTooLarge, "the body is larger than a 25 MiB map can be")
		}
		return err
	}
	limits := storage.SourcemapLimits{Files: s.cfg.SourcemapMaxFiles, Bytes: s.cfg.SourcemapMaxBytes}
	if err := s.db.UpsertSourcemap(r.Context(), site, up.release, up.file, up.data, limits); err != nil {
		return err
	}
	writeJSON(w, http.StatusCreated, sourcemapAnswer{Size: up.size})
	return nil
}

// deleteSourcemaps deletes the maps of ?release= (only ?file= of it, when
// given) and answers 200 {files, bytes}, what was freed; 404 when nothing
// matches. It frees room under the per-site caps, so it needs the admin
// token or an admin key rather than the upload credential, which pages
// publish.
//
// DELETE /v1/sites/:siteId/sourcemaps
func (s *Server) deleteSourcemaps(w http.ResponseWriter, r *http.Request, ps httprouter.Params) error {
	p, site, err := s.site(r, ps.ByName("siteId"), storage.ScopeAdmin)
	if err != nil {
		return err
	}
	q := r.URL.Query()
	release, file := q.Get("release"), q.Get("file")
	if release == "" {
		return fault.Errorf(fault.InvalidSourcemap, "name the release to delete: ?release=<release>[&file=<file>]")
	}
	files, freed, err := s.db.DeleteSourcemaps(r.Context(), p.actor(), site, release, file)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, sourcemapDeletion{Files: files, Bytes: freed})
	return nil
}

var errSourcemapCredential = fault.Errorf(fault.Unauthorized, "this credential cannot upload sourcemaps to that site")

// sourcemapSite authenticates an upload to siteID with the collector's
// credentials under REQUIRE_API_KEY (collectorCredential): the site id as
// bearer (none, tag) or an API key with ingest:write (tag, require). The
// path names the site, so a key needs no X-Site-Id; one that names another
// site is refused. A credential for any other site is 401 whether or not
// siteID exists, so site ids cannot be probed; where site bearers are
// accepted, a site's own id for a site that does not exist is 404.
func (s *Server) sourcemapSite(r *http.Request, siteID string) (*storage.Site, error) {
	if r.Header.Get("X-Site-Id") == "" {
		r = r.Clone(r.Context())
		r.Header.Set("X-Site-Id", siteID)
	}
	site, _, err := s.collectorCredential(r)
	if fault.Code(err) == fault.Unauthorized {
		token, _ := bearer(r)
		if s.cfg.RequireAPIKey != KeyModeRequire && subtle.ConstantTimeCompare([]byte(token), []byte(siteID)) == 1 {
			if _, ok := s.db.Site(siteID); !ok {
				return nil, errNotFound
			}
		}
		return nil, errSourcemapCredential
	}
	if err != nil {
		return nil, err
	}
	if subtle.ConstantTimeCompare([]byte(site.ID), []byte(siteID)) != 1 {
		return nil, errSourcemapCredential
	}
	return site, nil
}

type sourcemapUpload struct {
	release, file string
	// data is the decoded map in pieces of at most sourcemapChunk bytes.
	data   [][]byte
	size   int
	hasMap bool
}

// parseSourcemap reads {"release": s, "file": s, "map": base64} from r.
// Unknown fields are skipped.
func parseSourcemap(r io.Reader) (*sourcemapUpload, error) {
	js := &jsonStream{r: bufio.NewReaderSize(r, 64<<10)}
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
			if up.data, up.size, err = js.base64String(); err != nil {
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
	if _, err := js.next(); !errors.Is(err, io.EOF) {
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
	r *bufio.Reader
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
// standard base64 while reading it, up to sourcemapMaxDecoded bytes, and
// returns the bytes in pieces (see readChunked) and their total.
func (js *jsonStream) base64String() ([][]byte, int, error) {
	content := &stringContent{r: js.r}
	dec := base64.NewDecoder(base64.StdEncoding, content)
	data, size, err := readChunked(io.LimitReader(dec, sourcemapMaxDecoded+1))
	if content.err != nil {
		if errors.Is(content.err, errBadEscape) {
			return nil, 0, fault.Errorf(fault.InvalidSourcemap, "map must be plain base64")
		}
		return nil, 0, js.syntax(content.err)
	}
	if err != nil {
		return nil, 0, fault.Errorf(fault.InvalidSourcemap, "map is not valid base64: %v", err)
	}
	if size > sourcemapMaxDecoded {
		return nil, 0, errMapTooLarge
	}
	// The decoder stops at padding: anything after it in the string is bad.
	if rest, err := io.ReadAll(content); err != nil || len(bytes.TrimSpace(rest)) > 0 {
		return nil, 0, fault.Errorf(fault.InvalidSourcemap, "map is not valid base64: data after the padding")
	}
	return data, size, nil
}

// readChunked reads r to its end into chunks, each allocated only once the
// previous one is full and no larger than what has arrived so far (64 KiB
// first, then doubling up to sourcemapChunk), and returns them with their
// total length. Memory thus follows the bytes received, never a size the
// client announced, and is about the data itself: the chunks are stored as
// they are (storage writes each as a part of the map), never joined.
func readChunked(r io.Reader) ([][]byte, int, error) {
	var chunks [][]byte
	total := 0
	for size := 64 << 10; ; size = min(2*size, sourcemapChunk) {
		chunk := make([]byte, size)
		// Not io.ReadFull: it reports a short last chunk as
		// io.ErrUnexpectedEOF, which is also what the base64 decoder says
		// of a truncated map; only io.EOF is the end.
		n, err := 0, error(nil)
		for n < size && err == nil {
			var m int
			m, err = r.Read(chunk[n:])
			n += m
		}
		total += n
		if n > 0 {
			chunks = append(chunks, chunk[:n])
		}
		if errors.Is(err, io.EOF) {
			return chunks, total, nil
		}
		if err != nil {
			return nil, 0, err
		}
	}
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
