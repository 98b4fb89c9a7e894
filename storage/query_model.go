package storage

import (
	"encoding/json"
	"strings"
	"time"

	"github.com/tally-analytics/tally/fault"
)

// The query API's model (docs/query-api.md): Plausible's Stats API v2
// query as Tally reads it, and its answer. server decodes nothing of it:
// it hands the body to DecodeQuery and the decoded query to Query, once,
// and encodes the QueryAnswer. query_parse.go validates the fields,
// query_goals.go computes the goal metrics, query_compare.go the
// comparisons, query_run.go runs the reads (query_plan.go, the SQL and
// the partials) and builds the answer.

// Bounds of a query (docs/query-api.md), far above any dashboard's needs.
const (
	maxQueryLimit       = 10000
	maxQueryDimensions  = 8
	maxFilterNodes      = 100
	maxFilterDepth      = 10
	maxFilterClauses    = 100
	maxFilterValueBytes = 1000
	maxPropNameBytes    = 300
	// maxQueryPatterns bounds the matches patterns of a query, all its
	// filters together: each is compiled (up to about 100 KB and 2 ms,
	// MaxPatternInsts) and, on PostgreSQL, matched against every distinct
	// value of its dimension in the range.
	maxQueryPatterns = 20
)

// QueryRequest is a query's body, decoded: a JSON object of the fields a
// query has, not yet validated (that needs the site's time zone, which
// Query reads).
type QueryRequest struct {
	fields map[string]json.RawMessage
}

// DecodeQuery reads a query's body as a JSON object of known fields.
func DecodeQuery(raw []byte) (*QueryRequest, error) {
	var body map[string]json.RawMessage
	if err := json.Unmarshal(raw, &body); err != nil || body == nil {
		return nil, fault.Errorf(fault.InvalidJSON, "request body must be a JSON object")
	}
	for k := range body {
		switch k {
		case "site_id", "metrics", "date_range", "dimensions", "filters", "order_by", "include", "pagination":
		case "date":
			return nil, fault.Errorf(fault.UnsupportedQuery, "date is not supported: give date_range as [from, to] instead")
		default:
			return nil, fault.Errorf(fault.InvalidQuery, "unknown field %q: a query has site_id, metrics, date_range, dimensions, filters, order_by, include and pagination", k)
		}
	}
	return &QueryRequest{fields: body}, nil
}

// SiteID is the body's site_id: POST /api/v2/query names its site so.
func (q *QueryRequest) SiteID() (string, error) {
	var id string
	raw, ok := q.fields["site_id"]
	if !ok || json.Unmarshal(raw, &id) != nil || id == "" {
		return "", fault.Errorf(fault.InvalidQuery, "Missing site ID. Please provide the required site_id parameter with your request: the site's id, its domain or one of its aliases.")
	}
	return id, nil
}

// parsedQuery is a validated query.
type parsedQuery struct {
	site       *Site
	loc        *time.Location
	metrics    []string
	dimensions []string
	filters    []QueryFilter
	filterEcho []any
	order      [][2]string
	orderGiven bool
	from, to   time.Time // [from, to)
	dateOnly   bool      // the range is whole days
	allRange   bool
	timeUnit   string
	totalRows  bool
	timeLabels bool
	imports    bool   // include.imports
	compare    string // "", previous_period, year_over_year, custom
	compareRng [2]time.Time
	// The revenue metrics' currencies, from the revenue goals the query
	// matches (query_revenue.go): one for every row, or (by goal) each
	// goal's; or Plausible's warning code, when there is none to give.
	revenueDefault string
	revenueByGoal  map[string]string
	revenueWarning string
	limit          int
	offset         int
	pagination     bool
}

// timeDimension is the query's time dimension, or "".
func (pq *parsedQuery) timeDimension() string {
	for _, d := range pq.dimensions {
		if TimeDimension(d) {
			return d
		}
	}
	return ""
}

// fixTimeUnit picks what the dimension "time" groups by, from the range's
// length: hours for a day or less, days up to 93 days, months beyond.
func (pq *parsedQuery) fixTimeUnit() {
	switch span := pq.to.Sub(pq.from); {
	case span <= 25*time.Hour:
		pq.timeUnit = "hour"
	case span <= 94*24*time.Hour:
		pq.timeUnit = "day"
	default:
		pq.timeUnit = "month"
	}
}

// unit is the bucket of the query's time dimension.
func (pq *parsedQuery) unit() string {
	d := pq.timeDimension()
	if d == "time" {
		return pq.timeUnit
	}
	return strings.TrimPrefix(d, "time:")
}

// defaultOrder is Plausible's: the time dimension ascending, then the
// first metric descending.
func defaultOrder(metrics, dims []string) [][2]string {
	var o [][2]string
	for _, d := range dims {
		if TimeDimension(d) {
			o = append(o, [2]string{d, "asc"})
		}
	}
	return append(o, [2]string{metrics[0], "desc"})
}

// statsQuery is pq over [from, to), as the reads take it.
func (pq *parsedQuery) statsQuery(from, to time.Time) StatsQuery {
	return StatsQuery{Site: pq.site.ID, From: from, To: to, Zone: pq.loc, Metrics: pq.metrics,
		Dimensions: pq.storedDimensions(), TimeUnit: pq.timeUnit, Filters: pq.filters, Imports: pq.imports && !pq.goalQuery()}
}

// QueryAnswer is the answer of a query (docs/query-api.md), in the
// shape of Plausible's Stats API v2; server/responses.go encodes it.
type QueryAnswer struct {
	Results []QueryResult
	Meta    QueryMeta
	Query   QueryEcho
}

// QueryResult is one group: its dimension values and its metrics, in the
// query's orders, and with include.comparisons its counterpart. A metric
// without a value is NaN: a revenue metric (RevenueMetric) of a group
// without revenue, which the answer shows as null.
type QueryResult struct {
	Dims    []string
	Metrics []float64
	// Currency is the revenue metrics' currency in this row, "" where
	// they have none (query_revenue.go).
	Currency   string
	Comparison *QueryComparison
}

// QueryComparison is a result's counterpart in the comparison range;
// Change is each metric's change (nil where it has none).
type QueryComparison struct {
	Dims    []string
	Metrics []float64
	Change  []*float64
}

// QueryMeta holds what include asked for, and the warnings of metrics
// whose figures are estimates.
type QueryMeta struct {
	TimeLabels     []string
	TotalRows      *int
	MetricWarnings map[string]QueryWarning
	// RevenueCurrency is the currency of total_revenue and average_revenue
	// (docs/query-api.md#goals-and-funnels).
	RevenueCurrency string
	// Imports is set with include.imports (query_imports.go).
	Imports *QueryImports
}

// QueryWarning is a metric's caveat (Plausible's meta.metric_warnings): a
// code and a message.
type QueryWarning struct {
	Code, Warning string
}

// QueryImports says, with include.imports, whether the answer counts
// imported days, else Plausible's reason and warning, and the imported
// days of the range, [first, last] per import.
type QueryImports struct {
	Included   bool
	SkipReason string
	Warning    string
	Ranges     [][2]string
}

// QueryEcho is the query as run: defaults filled in, the range as
// datetimes in the site's time zone.
type QueryEcho struct {
	SiteID     string
	Metrics    []string
	DateRange  []string
	Filters    []any // the filters normalised, as JSON values
	Dimensions []string
	OrderBy    [][2]string
	TotalRows  bool
	TimeLabels bool
	Imports    bool
	// Comparison is the comparison asked for, nil for none.
	Comparison *QueryComparisonEcho
	Limit      int
	Offset     int
}

// QueryComparisonEcho is the comparison mode and the range it compared
// with.
type QueryComparisonEcho struct {
	Mode      string
	DateRange []string
}
