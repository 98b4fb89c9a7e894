package storage

import (
	"fmt"
	"testing"
)

// TestParseRevenue reads an event's amount and currency as the revenue
// metrics do (docs/query-api.md#goals-and-funnels).
func TestParseRevenue(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		revenue, currency, want string
	}{
		{"12.5", "eur", "12.5 EUR true"},
		{" 3 ", " usd ", "3 USD true"},
		{`{"amount":"7.25","currency":"EUR"}`, "", "7.25 EUR true"},
		{`{"amount":7,"currency":"GBP"}`, "USD", "7 GBP true"},
		{"12.5", "", "0  false"},
		{"12.5", "EURO", "0  false"},
		{"NaN", "EUR", "0  false"},
		{"1e16", "EUR", "0  false"},
		{`{"amount":`, "EUR", "0  false"},
	} {
		a, cur, ok := parseRevenue(c.revenue, c.currency)
		if got := fmt.Sprint(a, " ", cur, " ", ok); got != c.want {
			t.Errorf("%q %q: got %s, want %s", c.revenue, c.currency, got, c.want)
		}
	}
}
