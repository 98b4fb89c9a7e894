package server

import (
	"math"
	"strconv"
	"strings"

	"github.com/tally-analytics/tally/storage"
)

// Revenue metrics in the query API's answer, as Plausible's Stats API v2
// shows them (docs/query-api.md#goals-and-funnels): an object of the
// currency, the amount written out in full and in short, and the value;
// null for a group without revenue.

// revenueValue is a revenue metric's value: Plausible's
// {currency, long, short, value}.
type revenueValue struct {
	Currency string  `json:"currency"`
	Long     string  `json:"long"`
	Short    string  `json:"short"`
	Value    float64 `json:"value"`
}

// queryMetrics is metrics (named by names) as the answer shows them:
// numbers, revenue metrics as revenueValue in currency, null for none.
func queryMetrics(names []string, metrics []float64, currency string) []any {
	out := make([]any, len(metrics))
	for i, v := range metrics {
		switch {
		case math.IsNaN(v) || math.IsInf(v, 0):
			out[i] = nil
		case i < len(names) && storage.RevenueMetric(names[i]) && currency != "":
			out[i] = money(v, currency)
		default:
			out[i] = v
		}
	}
	return out
}

// currencySymbols are the symbols of CLDR's English locale, which
// Plausible's amounts use; another currency is written with its code.
var currencySymbols = map[string]string{
	"USD": "$", "EUR": "€", "GBP": "£", "JPY": "¥", "CNY": "CN¥", "INR": "₹", "KRW": "₩",
	"CAD": "CA$", "AUD": "A$", "NZD": "NZ$", "HKD": "HK$", "MXN": "MX$", "BRL": "R$",
	"TWD": "NT$", "ILS": "₪", "VND": "₫", "PHP": "₱",
}

// wholeCurrencies have no minor unit in CLDR: amounts are whole.
var wholeCurrencies = map[string]bool{"JPY": true, "KRW": true, "VND": true, "CLP": true, "ISK": true}

// money is v in currency as Plausible writes it in English: long with
// thousands separators and the currency's decimals ("$1,659.50"), short
// with one decimal and K, M, B or T from a thousand on ("$1.7K",
// "$600.0").
func money(v float64, currency string) revenueValue {
	sym, ok := currencySymbols[currency]
	if !ok {
		sym = currency + "\u00a0"
	}
	sign := ""
	if v < 0 {
		sign = "-"
	}
	a := math.Abs(v)
	decimals := 2
	if wholeCurrencies[currency] {
		decimals = 0
	}
	return revenueValue{Currency: currency, Value: v,
		Long:  sign + sym + grouped(strconv.FormatFloat(a, 'f', decimals, 64)),
		Short: sign + sym + shortAmount(a)}
}

// shortAmount is a non-negative amount to one decimal, scaled to K, M, B
// or T from a thousand on.
func shortAmount(a float64) string {
	suffix := ""
	for _, s := range []string{"K", "M", "B", "T"} {
		// Rounded first, so 999.96 is 1.0K rather than 1000.0.
		if math.Round(a*10)/10 < 1000 {
			break
		}
		a, suffix = a/1000, s
	}
	return strconv.FormatFloat(a, 'f', 1, 64) + suffix
}

// grouped puts a comma between each three digits of the whole part of
// the decimal text s.
func grouped(s string) string {
	whole, frac, hasFrac := strings.Cut(s, ".")
	var b strings.Builder
	for i, c := range whole {
		if i > 0 && (len(whole)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if hasFrac {
		b.WriteString("." + frac)
	}
	return b.String()
}
