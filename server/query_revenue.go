package server

import (
	"math"
	"strconv"
	"strings"

	"golang.org/x/text/currency"

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
// numbers, revenue metrics as revenueValue in currency (the row's, ""
// for none: then a plain number), null for none.
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

// currencyDecimals is how many decimals CLDR gives currency's amounts
// (2 for most, 0 for JPY, 3 for BHD), at most the 3 Tally keeps.
func currencyDecimals(code string) int {
	u, err := currency.ParseISO(code)
	if err != nil {
		return 2
	}
	scale, _ := currency.Standard.Rounding(u)
	return min(scale, 3)
}

// money is v in currency as Plausible writes it in English: long with
// thousands separators and the currency's decimals ("$1,659.50"), short
// with one decimal and K, M, B or T from a thousand on ("$1.7K",
// "$600.0"). Both round half to even on the amount in thousandths (the
// precision revenue is kept in), as Plausible's decimal amounts do
// ("$50.4" for 50.45).
func money(v float64, currency string) revenueValue {
	sym, ok := currencySymbols[currency]
	if !ok {
		sym = currency + "\u00a0"
	}
	milli := int64(math.Round(v * 1000))
	sign := ""
	if milli < 0 {
		sign, milli = "-", -milli
	}
	return revenueValue{Currency: currency, Value: v,
		Long:  sign + sym + grouped(decimalText(milli, currencyDecimals(currency))),
		Short: sign + sym + shortAmount(milli)}
}

// halfEven is a/d rounded half to even (a >= 0, d > 0).
func halfEven(a, d int64) int64 {
	q, r := a/d, a%d
	if 2*r > d || 2*r == d && q%2 == 1 {
		q++
	}
	return q
}

// pow10 is 10 to the n (0 <= n <= 18).
func pow10(n int) int64 {
	p := int64(1)
	for range n {
		p *= 10
	}
	return p
}

// decimalText is milli thousandths rounded to decimals (0 to 3) places,
// as text.
func decimalText(milli int64, decimals int) string {
	q := halfEven(milli, pow10(3-decimals))
	s := strconv.FormatInt(q, 10)
	if decimals == 0 {
		return s
	}
	if len(s) <= decimals {
		s = strings.Repeat("0", decimals-len(s)+1) + s
	}
	return s[:len(s)-decimals] + "." + s[len(s)-decimals:]
}

// shortAmount is a non-negative amount in thousandths to one decimal,
// scaled to K, M, B or T from a thousand on.
func shortAmount(milli int64) string {
	suffixes := []string{"", "K", "M", "B", "T"}
	for i, suffix := range suffixes {
		// Tenths of the scaled amount, rounded first, so 999.96 is 1.0K
		// rather than 1000.0.
		tenths := halfEven(milli, pow10(2+3*i))
		if tenths < 10000 || i == len(suffixes)-1 {
			return strconv.FormatInt(tenths/10, 10) + "." + strconv.FormatInt(tenths%10, 10) + suffix
		}
	}
	return ""
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
