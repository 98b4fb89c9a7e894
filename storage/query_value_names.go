package storage

import "strings"

// plausibleNames maps, per v2 dimension, the value Tally stores (SPEC's
// names, privacy.ParseAgent's) to the name Plausible answers with. The
// mapping is done at the query layer, in the dimension's SQL expression,
// so that answers and filters both speak Plausible's names while the
// stored rows, the agent codes and SPEC's own /v1 reads keep SPEC's
// values (docs/query-api.md#value-names).
var plausibleNames = map[string][][2]string{
	"visit:os": {{"macOS", "Mac"}, {"Linux", "GNU/Linux"}, {"ChromeOS", "Chrome OS"}},
	"visit:device": {{"desktop", "Desktop"}, {"mobile", "Mobile"}, {"tablet", "Tablet"},
		{"other", "Other"}},
	// Plausible folds mobile builds into the browser (its ingestion's
	// browser_name) and keeps UAInspector's names.
	"visit:browser": {{"Mobile Safari", "Safari"}, {"Edge", "Microsoft Edge"}, {"IE", "Internet Explorer"},
		{"Samsung Browser", "Samsung Internet"}, {"Opera Mini", "Opera"}},
}

// plausibleNameSQL wraps expr, the stored value of dimension d, in the
// CASE that renames it to Plausible's name; other dimensions are expr.
func plausibleNameSQL(d, expr string) string {
	pairs, ok := plausibleNames[d]
	if !ok {
		return expr
	}
	var b strings.Builder
	b.WriteString("CASE " + expr)
	for _, p := range pairs {
		b.WriteString(" WHEN '" + p[0] + "' THEN '" + p[1] + "'")
	}
	b.WriteString(" ELSE " + expr + " END")
	return b.String()
}

// plausibleName is plausibleNameSQL for a value read in Go: imported days
// (withImported) keep the importer's stored names, renamed here so that
// live and imported rows of one value meet under Plausible's name
// (docs/query-api.md#value-names).
func plausibleName(d, value string) string {
	if d == "visit:referrer" && (value == "" || value == NotSet) {
		return DirectNone
	}
	for _, p := range plausibleNames[d] {
		if p[0] == value {
			return p[1]
		}
	}
	return value
}
