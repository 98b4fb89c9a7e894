package storage

import (
	"bytes"
	"database/sql/driver"
	_ "embed"
	"encoding/binary"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"time"

	"github.com/klauspost/compress/zstd"
	"modernc.org/sqlite"
)

// An event's wire bytes are stored compressed in events.raw
// (docs/storage.md#event-bytes). The stored form is a BLOB: a format byte
// (rawFormatV1), then a zstd frame without its 4-byte magic number. Before
// compression, every occurrence of a value the row also holds in a column
// (rawFields) is replaced by one byte 0x01–0x07: the JSON of an event never
// holds those bytes (JSON escapes them inside strings and allows only
// whitespace outside), so the replacement is undone exactly when the row is
// read, from its own columns. What is left is compressed with a fixed
// dictionary (rawdict/v1.json) made of synthetic events, so the dictionary
// holds no one's identifiers and an erasure leaves nothing of a subject behind.
// So an events row's columns must never change once stored (no UPDATE of them
// anywhere), or its raw would read back wrong; a change of them would have to
// rewrite raw with them. Rows written before 0010 hold raw as TEXT, the JSON
// itself, until the conversion (convert_raw.go) rewrites them; readers accept
// both.

// rawFormatV1 is the first byte of a stored raw in the form described above.
const rawFormatV1 = 1

// rawFormatV2 and rawFormatV3 also hold when the event was received
// (migration 0012): after the format byte, the received time minus ts in
// milliseconds as a zigzag varint (usually 1 to 4 bytes); received_at then
// holds the empty text (it must stay NOT NULL), 24 bytes fewer, and
// event_received_at gives the text back. Then rawFormatV2 holds the zstd
// frame of rawFormatV1; rawFormatV3 holds the text with the column values
// replaced as for rawFormatV1 and also the common JSON keys of rawKeys
// replaced by one byte each, not compressed: for a small event, shorter
// than zstd's frame, whose headers and dictionary references cost more
// than the keys. The writer stores whichever is shorter. Rows written
// before 0012 keep received_at until the conversion rewrites them; a raw
// stored as text keeps it for good.
const (
	rawFormatV2 = 2
	rawFormatV3 = 3
)

// rawKeys are the common JSON fragments of the tracking script's, the
// collector's and Segment's events, then JSON's own punctuation, that
// rawFormatV3 replaces, each by its byte of rawKeyBytes: bytes valid JSON
// in UTF-8 never holds (control bytes, which JSON allows only as tab, line
// feed and carriage return outside strings and escapes inside, and bytes
// no UTF-8 text holds). The first ones hold a column value's byte (the
// key of a column followed by the row's own value), so the usual key and
// value take one byte together. Frozen: rows written with them can only be
// read with exactly these (TestRawKeysAreFrozen); another table takes a
// new format byte.
var rawKeys = [...]string{
	"{\"id\":\"\x01", "\",\"site_id\":\"\x02", "\",\"type\":\"\x03", "\",\"anon_id\":\"\x04",
	"\",\"user_id\":\"\x05", "\",\"url\":\"\x06", "\",\"referrer\":\"\x07",
	`{"id":"`, `","site_id":"`, `","anon_id":"`, `","type":"`, `","ts":"`, `","url":"`, `","referrer":"`,
	`","user_id":"`, `","properties":{`, `"title":"`, `"messageId":"`, `"anonymousId":"`, `"userId":"`,
	`"timestamp":"`, `"context":{`, `"event":"`, `"traits":{`, `"library":{"name":"`, `"userAgent":"`,
	`"sentAt":"`, `"originalTimestamp":"`, `https://`, `","`, `":"`, `":`, `,"`, `"}`, `}}`,
}

// rawKeyBytes stand for rawKeys, in order.
var rawKeyBytes = [len(rawKeys)]byte{0x00, 0xc0, 0xc1, 0xf5, 0xf6, 0xf7, 0xf8,
	0x08, 0x0b, 0x0c, 0x0e, 0x0f, 0x10, 0x11, 0x12, 0x13, 0x14, 0x15, 0x16,
	0x17, 0x18, 0x19, 0x1a, 0x1b, 0x1c, 0x1d, 0x1e, 0x1f,
	0xf9, 0xfa, 0xfb, 0xfc, 0xfd, 0xfe, 0xff}

// rawDictID names rawdict/v1.json in zstd frames. A later dictionary takes a
// new id and format byte; this one must stay to read the rows written with it.
const rawDictID = 1

//go:embed rawdict/v1.json
var rawDictV1 []byte

var zstdMagic = []byte{0x28, 0xb5, 0x2f, 0xfd}

// rawFields are the column values of an events row that its raw may repeat:
// id, site_id, type, anon_id, user_id, url and referrer ("" for NULL).
type rawFields [7]string

// minRawField is the shortest value worth replacing by a byte.
const minRawField = 3

var rawCodec = sync.OnceValues(func() (*rawZstd, error) {
	enc, err := zstd.NewWriter(nil, zstd.WithEncoderDictRaw(rawDictID, rawDictV1), zstd.WithEncoderCRC(false),
		zstd.WithSingleSegment(true), zstd.WithEncoderConcurrency(runtime.GOMAXPROCS(0)),
		zstd.WithEncoderLevel(zstd.SpeedFastest))
	if err != nil {
		return nil, err
	}
	dec, err := zstd.NewReader(nil, zstd.WithDecoderDictRaw(rawDictID, rawDictV1), zstd.WithDecoderConcurrency(0))
	if err != nil {
		return nil, err
	}
	return &rawZstd{enc: enc, dec: dec}, nil
})

type rawZstd struct {
	enc *zstd.Encoder
	dec *zstd.Decoder
}

// usable tells whether v may be replaced by a byte: long enough to gain, and
// free of the replacement bytes themselves.
func usable(v string) bool {
	if len(v) < minRawField {
		return false
	}
	for i := 0; i < len(v); i++ {
		if v[i] <= byte(len(rawFields{})) {
			return false
		}
	}
	return true
}

// storedRaw returns what events.raw and events.received_at hold for raw in
// a row holding f, with ts and received as stored (FormatTime): a BLOB of
// rawFormatV2 or rawFormatV3, whichever is shorter (rawFormatV3 outright up
// to rawPlainUpTo bytes), and the empty text; or
// the text itself and received when raw is not the JSON of an event (a
// control byte in it would make the replacements ambiguous).
func storedRaw(raw []byte, f rawFields, ts, received string) (stored any, receivedAt string) {
	if len(raw) == 0 || reserved(raw) {
		return string(raw), received
	}
	c, err := rawCodec()
	delta, ok := receivedDelta(ts, received)
	if err != nil || !ok {
		// Times not in FormatTime's layout could not be given back
		// exactly: rawFormatV1, with received_at in its column.
		if b, err := encodeRaw(raw, f); err == nil && b != nil {
			return b, received
		}
		return string(raw), received
	}
	s := replaceValues(raw, f)
	keyed := replaceKeys(s)
	format, body := byte(rawFormatV3), keyed
	if len(keyed) > rawPlainUpTo {
		if frame := c.enc.EncodeAll(s, make([]byte, 0, len(s)/2+16))[len(zstdMagic):]; len(frame) < len(keyed) {
			format, body = rawFormatV2, frame
		}
	}
	out := binary.AppendVarint(append(make([]byte, 0, 1+binary.MaxVarintLen64+len(body)), format), delta)
	return append(out, body...), ""
}

// rawPlainUpTo is the length of keyed text up to which rawFormatV3 is
// stored without trying zstd: a frame of so little is rarely shorter (its
// headers alone take 6 bytes), and compressing costs about 2 µs.
const rawPlainUpTo = 48

// reserved reports whether raw holds a byte the stored forms use for
// replacements: a control byte other than tab, line feed and carriage
// return, or a byte of rawKeyBytes.
func reserved(raw []byte) bool {
	for _, b := range raw {
		if b < 0x20 && b != '\t' && b != '\n' && b != '\r' || b == 0xc0 || b == 0xc1 || b >= 0xf5 {
			return true
		}
	}
	return false
}

// replaceValues replaces every occurrence in raw of a usable value of f by
// its byte: what bytes.ReplaceAll of each usable value in turn gives.
func replaceValues(raw []byte, f rawFields) []byte {
	r := seqReplaces.Get().(*seqReplace)
	defer seqReplaces.Put(r)
	r.reset(raw, len(f))
	for i, v := range f {
		if !usable(v) {
			continue
		}
		for from := 0; ; {
			k := bytes.Index(raw[from:], []byte(v))
			if k < 0 {
				break
			}
			r.candidate(i, from+k, len(v))
			from += k + 1
		}
	}
	return r.apply(func(i int) byte { return byte(i + 1) })
}

// replaceKeys replaces the rawKeys in s by their bytes: what bytes.ReplaceAll
// of each key in turn, in rawKeys' order, gives (rawFormatV3), found in
// one scan of s instead of one per key.
func replaceKeys(s []byte) []byte {
	r := seqReplaces.Get().(*seqReplace)
	defer seqReplaces.Put(r)
	r.reset(s, len(rawKeys))
	for at := 0; at+1 < len(s); at++ {
		g := rawKeyGroup[s[at]]
		if g == 0 {
			continue
		}
		for _, i := range rawKeysByPair[g-1][s[at+1]] {
			if k := rawKeys[i]; bytes.HasPrefix(s[at:], []byte(k)) {
				r.candidate(int(i), at, len(k))
			}
		}
	}
	return r.apply(func(i int) byte { return rawKeyBytes[i] })
}

// rawKeyGroup numbers (from 1) the first bytes of rawKeys; rawKeysByPair
// lists, for a group and a second byte, the keys that start with the two
// bytes, in rawKeys' order.
var rawKeyGroup, rawKeysByPair = func() (group [256]uint8, byPair [][256][]uint8) {
	for i, k := range rawKeys {
		if group[k[0]] == 0 {
			byPair = append(byPair, [256][]uint8{})
			group[k[0]] = uint8(len(byPair))
		}
		g := &byPair[group[k[0]]-1]
		g[k[1]] = append(g[k[1]], uint8(i))
	}
	return group, byPair
}()

// seqReplace computes in one pass what replacing several patterns in turn
// gives (bytes.ReplaceAll of the first, then of the second in its result...),
// each by one byte, when no pattern holds a replacement byte and neither does
// the source: then a match of a later pattern lies in the source's own
// bytes, clear of every earlier replacement, so the outcome is the
// source's occurrences of each pattern, in pattern order, taken leftmost
// first where they overlap neither an earlier pattern's nor one already
// taken of the same pattern. Its buffers are kept for the next use
// (seqReplaces).
type seqReplace struct {
	src []byte
	// at are each pattern's candidate starts, ascending, and lens its
	// length; n patterns are in use.
	at   [len(rawKeys)][]int32
	lens [len(rawKeys)]int
	n    int
	some bool
	// mark is, per byte of src, 0 while free, 1 once replaced, 2+p at the
	// start of a match of pattern p.
	mark []uint8
}

var seqReplaces = sync.Pool{New: func() any { return new(seqReplace) }}

func (r *seqReplace) reset(src []byte, patterns int) {
	r.src, r.n, r.some = src, patterns, false
	for i := range patterns {
		r.at[i] = r.at[i][:0]
	}
}

// candidate records an occurrence of pattern p, n bytes long, at at; each
// pattern's in ascending order.
func (r *seqReplace) candidate(p, at, n int) {
	r.at[p] = append(r.at[p], int32(at))
	r.lens[p], r.some = n, true
}

// apply returns the replaced text (src itself when nothing matched); sub
// gives a pattern's byte, and a pattern's number its turn.
func (r *seqReplace) apply(sub func(p int) byte) []byte {
	if !r.some {
		return r.src
	}
	mark := slices.Grow(r.mark[:0], len(r.src))[:len(r.src)]
	clear(mark)
	r.mark = mark
	for p := range r.n {
		n, last := r.lens[p], 0
	next:
		for _, a := range r.at[p] {
			at := int(a)
			if at < last {
				continue
			}
			for k := at; k < at+n; k++ {
				if mark[k] != 0 {
					continue next
				}
			}
			mark[at] = uint8(2 + p)
			for k := at + 1; k < at+n; k++ {
				mark[k] = 1
			}
			last = at + n
		}
	}
	out := make([]byte, 0, len(r.src))
	for i := 0; i < len(r.src); {
		if m := mark[i]; m >= 2 {
			out = append(out, sub(int(m-2)))
			i += r.lens[m-2]
			continue
		}
		j := i + 1
		for j < len(r.src) && mark[j] == 0 {
			j++
		}
		out = append(out, r.src[i:j]...)
		i = j
	}
	return out
}

// receivedDelta returns received minus ts in milliseconds; ok is false when
// either is not in FormatTime's layout, which the reader could not give
// back exactly.
func receivedDelta(ts, received string) (delta int64, ok bool) {
	if t, ok := storedTimeMS(ts); ok {
		if r, ok := storedTimeMS(received); ok {
			return r - t, true
		}
	}
	t, err1 := time.Parse(timeLayout, ts)
	r, err2 := time.Parse(timeLayout, received)
	if err1 != nil || err2 != nil || FormatTime(t) != ts || FormatTime(r) != received {
		return 0, false
	}
	return r.UnixMilli() - t.UnixMilli(), true
}

// storedTimeMS reads a time in FormatTime's layout (timeLayout,
// 2006-01-02T15:04:05.000Z) as milliseconds since the epoch, without
// time.Parse and the FormatTime that checks what it read: ok only when
// every field is digits and in range (the day within its month), so that
// FormatTime gives the text back. receivedDelta then knows the answer of
// its slower check; a text this refuses takes that check.
func storedTimeMS(s string) (int64, bool) {
	if len(s) != len(timeLayout) || s[4] != '-' || s[7] != '-' || s[10] != 'T' || s[13] != ':' || s[16] != ':' || s[19] != '.' || s[23] != 'Z' {
		return 0, false
	}
	num := func(from, to int) int {
		n := 0
		for i := from; i < to; i++ {
			c := s[i]
			if c < '0' || c > '9' {
				return -1
			}
			n = n*10 + int(c-'0')
		}
		return n
	}
	y, mo, d, h, mi, sec, ms := num(0, 4), num(5, 7), num(8, 10), num(11, 13), num(14, 16), num(17, 19), num(20, 23)
	if y < 0 || mo < 1 || mo > 12 || d < 1 || h < 0 || h > 23 || mi < 0 || mi > 59 || sec < 0 || sec > 59 || ms < 0 {
		return 0, false
	}
	t := time.Date(y, time.Month(mo), d, h, mi, sec, ms*int(time.Millisecond), time.UTC)
	if t.Day() != d { // past the month's last day
		return 0, false
	}
	return t.UnixMilli(), true
}

// receivedOf returns the received_at text of a row: the column, or when it
// is empty the time rawFormatV2 or rawFormatV3 keeps in stored, relative
// to ts.
func receivedOf(column string, stored any, ts string) (string, error) {
	if column != "" {
		return column, nil
	}
	b, ok := stored.([]byte)
	if !ok || len(b) == 0 || b[0] != rawFormatV2 && b[0] != rawFormatV3 {
		return "", nil
	}
	delta, n := binary.Varint(b[1:])
	if n <= 0 {
		return "", fmt.Errorf("stored raw: bad received time")
	}
	t, err := time.Parse(timeLayout, ts)
	if err != nil {
		return "", fmt.Errorf("stored raw: ts %q: %w", ts, err)
	}
	return FormatTime(time.UnixMilli(t.UnixMilli() + delta)), nil
}

// encodeRaw returns the rawFormatV1 form of raw, for a row holding f, or
// nil when raw cannot take it.
func encodeRaw(raw []byte, f rawFields) ([]byte, error) {
	c, err := rawCodec()
	if err != nil {
		return nil, err
	}
	if reserved(raw) {
		return nil, nil
	}
	s := replaceValues(raw, f)
	frame := c.enc.EncodeAll(s, make([]byte, 1, len(s)/2+16))
	frame[0] = rawFormatV1
	// Drop the magic number, the same in every frame.
	return append(frame[:1], frame[1+len(zstdMagic):]...), nil
}

// decodeRaw returns the wire bytes of a stored raw (TEXT as is, or a BLOB of
// the form encodeRaw writes), for a row holding f.
func decodeRaw(stored any, f rawFields) ([]byte, error) {
	switch v := stored.(type) {
	case string:
		return []byte(v), nil
	case nil:
		return nil, nil
	case []byte:
		if len(v) == 0 || v[0] < rawFormatV1 || v[0] > rawFormatV3 {
			return nil, fmt.Errorf("stored raw: unknown format")
		}
		body := v[1:]
		if v[0] != rawFormatV1 {
			_, n := binary.Varint(body)
			if n <= 0 {
				return nil, fmt.Errorf("stored raw: bad received time")
			}
			body = body[n:]
		}
		var s []byte
		if v[0] == rawFormatV3 {
			s = body
			for i := len(rawKeys) - 1; i >= 0; i-- {
				if bytes.IndexByte(s, rawKeyBytes[i]) >= 0 {
					s = bytes.ReplaceAll(s, []byte{rawKeyBytes[i]}, []byte(rawKeys[i]))
				}
			}
			s = bytes.Clone(s) // body is the driver's buffer when nothing was replaced
		} else {
			c, err := rawCodec()
			if err != nil {
				return nil, err
			}
			frame := append(append(make([]byte, 0, len(zstdMagic)+len(body)), zstdMagic...), body...)
			if s, err = c.dec.DecodeAll(frame, nil); err != nil {
				return nil, fmt.Errorf("stored raw: %w", err)
			}
		}
		for i := len(f) - 1; i >= 0; i-- {
			if usable(f[i]) {
				s = bytes.ReplaceAll(s, []byte{byte(i + 1)}, []byte(f[i]))
			}
		}
		return s, nil
	default:
		return nil, fmt.Errorf("stored raw: unexpected %T", stored)
	}
}

// fieldsOf returns the rawFields of an event about to be stored.
func fieldsOf(e *IngestEvent) rawFields {
	return rawFields{e.ID, e.SiteID, e.Type, e.AnonID, deref(e.UserID), deref(e.URL), deref(e.Referrer)}
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// rawSQL is the SQL function that gives an events row's raw as its wire
// text, whichever form the row holds it in:
// event_raw(raw, id, site_id, type, anon_id, user_id, url, referrer).
// Every reader of raw goes through it, and so can tests' and operators'
// queries run by a Go program that imports this package.
const rawSQL = `event_raw(raw, id, site_id, type, anon_id, user_id, url, referrer)`

// receivedSQL gives an events row's received_at text, from the column or,
// where that is empty (rawFormatV2, rawFormatV3), from raw and ts. Every
// reader of received_at goes through it.
const receivedSQL = `event_received_at(received_at, raw, ts)`

func init() {
	sqlite.MustRegisterDeterministicScalarFunction("event_raw", 8, func(_ *sqlite.FunctionContext, args []driver.Value) (driver.Value, error) {
		var f rawFields
		for i := range f {
			switch v := args[i+1].(type) {
			case string:
				f[i] = v
			case []byte:
				f[i] = string(v)
			}
		}
		raw, err := decodeRaw(args[0], f)
		if err != nil || raw == nil {
			return nil, err
		}
		return string(raw), nil
	})
	// event_received_at(received_at, raw, ts) is the received_at text of
	// an events row, whichever form holds it (rawFormatV2, rawFormatV3).
	sqlite.MustRegisterDeterministicScalarFunction("event_received_at", 3, func(_ *sqlite.FunctionContext, args []driver.Value) (driver.Value, error) {
		column, _ := args[0].(string)
		ts, _ := args[2].(string)
		return receivedOf(column, args[1], ts)
	})
	// dedup_key(id) is dedupKey, for migration 0010.
	sqlite.MustRegisterDeterministicScalarFunction("dedup_key", 1, func(_ *sqlite.FunctionContext, args []driver.Value) (driver.Value, error) {
		if s, ok := args[0].(string); ok {
			return dedupKey(s), nil
		}
		return args[0], nil
	})
}
