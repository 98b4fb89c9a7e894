package storage

import (
	"context"
	"encoding/json"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// Revenue in the query API (docs/query-api.md#revenue), as Plausible's
// Stats API v2 has it: a goal of an event name may have a currency (a
// revenue goal, report_goal_currency.go); an event's amount counts in
// total_revenue and average_revenue when its name is a revenue goal's
// event name and its currency that goal's; the query's currency comes from
// the revenue goals it matches (those its top-level event:goal filters
// pick, all without them): one for every row, each goal's in a breakdown
// by goal, or none with Plausible's warning in meta.metric_warnings.

// Plausible's revenue warnings: their codes and texts.
const (
	revenueNoGoals       = "no_revenue_goals_matching"
	revenueManyCurrecies = "no_single_revenue_currency"
)

var revenueWarningTexts = map[string]string{
	revenueNoGoals:       "Revenue metrics are null as there are no matching revenue goals.",
	revenueManyCurrecies: "Revenue metrics are null as there are multiple currencies for the selected event:goals.",
}

// Where an event's amount is read from: its custom properties
// (docs/query-api.md#revenue).
const (
	revenueProp  = "revenue"
	currencyProp = "currency"
)

// revenueAsked reports whether pq asks a revenue metric.
func (pq *parsedQuery) revenueAsked() bool { return slices.ContainsFunc(pq.metrics, RevenueMetric) }

// planRevenue sets pq's revenue currencies from the revenue goals of
// matching, as Plausible's Revenue.preload does: none is
// no_revenue_goals_matching; one, without a breakdown by goal, every
// row's; by goal, each goal's (a goal without one has none); several
// without a breakdown by goal, no_single_revenue_currency.
func (pq *parsedQuery) planRevenue(matching []Goal, byGoal bool) {
	pq.revenueDefault, pq.revenueByGoal, pq.revenueWarning = "", nil, ""
	byName := map[string]string{}
	var currencies []string
	for _, g := range matching {
		if g.Currency == "" {
			continue
		}
		byName[g.Name] = g.Currency
		if !slices.Contains(currencies, g.Currency) {
			currencies = append(currencies, g.Currency)
		}
	}
	switch {
	case len(currencies) == 0:
		pq.revenueWarning = revenueNoGoals
	case byGoal:
		pq.revenueByGoal = byName
	case len(currencies) == 1:
		pq.revenueDefault = currencies[0]
	default:
		pq.revenueWarning = revenueManyCurrecies
	}
}

// rowCurrency is the revenue metrics' currency in a row of goal (the
// row's goal in a breakdown by goal, else ""), "" for none.
func (pq *parsedQuery) rowCurrency(goal string) string {
	if pq.revenueWarning != "" {
		return ""
	}
	if pq.revenueDefault != "" {
		return pq.revenueDefault
	}
	return pq.revenueByGoal[goal]
}

// resultCurrency is rowCurrency of the row of dims.
func (pq *parsedQuery) resultCurrency(dims []string) string {
	if !pq.revenueAsked() {
		return ""
	}
	goal := ""
	if gi := slices.Index(pq.dimensions, GoalDimension); gi >= 0 && gi < len(dims) {
		goal = dims[gi]
	}
	return pq.rowCurrency(goal)
}

// addRevenueWarnings puts pq's revenue warning, if any, on each revenue
// metric asked, in meta.metric_warnings.
func (pq *parsedQuery) addRevenueWarnings(meta *QueryMeta) {
	if pq.revenueWarning == "" {
		return
	}
	for _, m := range pq.metrics {
		if !RevenueMetric(m) {
			continue
		}
		if meta.MetricWarnings == nil {
			meta.MetricWarnings = map[string]QueryWarning{}
		}
		meta.MetricWarnings[m] = QueryWarning{Code: pq.revenueWarning, Warning: revenueWarningTexts[pq.revenueWarning]}
	}
}

// revenueGoalCurrencies maps an event name to the currency of the site's
// revenue goal of that name (the first created, should two share it):
// the currency its amounts count in, as Plausible's ingestion gives an
// event the revenue of the revenue goal of its name.
func revenueGoalCurrencies(goals []Goal) map[string]string {
	byID := slices.Clone(goals)
	slices.SortFunc(byID, func(a, b Goal) int { return int(a.ID - b.ID) })
	out := map[string]string{}
	for _, g := range byID {
		if g.Currency != "" && g.EventName != "" {
			if _, ok := out[g.EventName]; !ok {
				out[g.EventName] = g.Currency
			}
		}
	}
	return out
}

// revenueSum is a group's revenue: the amounts' total in thousandths (the
// precision Plausible keeps, a Decimal64(3)) and how many events carried
// one.
type revenueSum struct {
	milli, n int64
}

// totalValue is the sum of the amounts.
func (s revenueSum) totalValue() float64 { return float64(s.milli) / 1000 }

// averageValue is their mean, in thousandths truncated, as Plausible's
// decimal mean is (201.2 over 3 is 67.066); 0 without any.
func (s revenueSum) averageValue() float64 {
	if s.n == 0 {
		return 0
	}
	return float64(s.milli/s.n) / 1000
}

// revenue reads the amounts of the events of q's groups (each part's), by
// breaking them down by event name and their revenue and currency
// properties and multiplying each amount by its events. An amount counts
// when currencies (revenueGoalCurrencies) gives its event name its
// currency: Tally has no exchange rates, so an amount in another currency
// than its goal's is left out, where Plausible would convert it.
func (db *DB) revenue(ctx context.Context, q StatsQuery, filters []QueryFilter,
	parts []goalPart, withGoal func([]string, string) []string, currencies map[string]string) (map[string]revenueSum, error) {
	out := map[string]revenueSum{}
	if len(currencies) == 0 {
		return out, nil
	}
	q.Metrics = []string{MetricEvents}
	n := len(q.Dimensions)
	q.Dimensions = append(slices.Clone(q.Dimensions), "event:name", PropPrefix+revenueProp, PropPrefix+currencyProp)
	for _, p := range parts {
		pqq := q
		pqq.Filters = append(slices.Clone(filters), p.filter...)
		rows, err := db.Stats(ctx, pqq)
		if err != nil {
			return nil, err
		}
		for _, row := range rows {
			amount, currency, ok := parseRevenue(row.Dims[n+1], row.Dims[n+2])
			if !ok || currencies[row.Dims[n]] != currency {
				continue
			}
			key := strings.Join(withGoal(row.Dims[:n], p.name), "\x00")
			events := int64(math.Round(row.Metrics[0]))
			sum := out[key]
			sum.milli += int64(math.Round(amount*1000)) * events
			sum.n += events
			out[key] = sum
		}
	}
	return out, nil
}

// currencyCode is an ISO 4217 code's shape.
var currencyCode = regexp.MustCompile(`^[A-Z]{3}$`)

// parseRevenue reads an event's amount and currency from its revenue and
// currency properties as the query API shows them: revenue a number (or a
// string of one) with currency a three-letter code, or revenue an object
// {"amount", "currency"} as Plausible's Events API sends it. false: no
// amount, or one without a currency.
func parseRevenue(revenue, currency string) (float64, string, bool) {
	if strings.HasPrefix(revenue, "{") {
		var obj struct {
			Amount   json.RawMessage `json:"amount"`
			Currency string          `json:"currency"`
		}
		if json.Unmarshal([]byte(revenue), &obj) != nil {
			return 0, "", false
		}
		revenue = strings.Trim(string(obj.Amount), `"`)
		currency = obj.Currency
	}
	amount, err := strconv.ParseFloat(strings.TrimSpace(revenue), 64)
	currency = strings.ToUpper(strings.TrimSpace(currency))
	if err != nil || amount != amount || amount > 1e15 || amount < -1e15 || !currencyCode.MatchString(currency) {
		return 0, "", false
	}
	return amount, currency, true
}
