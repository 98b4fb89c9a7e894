package storage

import (
	"strings"

	"golang.org/x/text/currency"

	"github.com/tally-analytics/tally/fault"
)

// A goal's currency (docs/query-api.md#goals-and-funnels): as Plausible's
// revenue goals, a custom event goal may have one, an ISO 4217 code of a
// currency in use today. golang.org/x/text/currency (already a
// dependency) carries CLDR's table of them, which would otherwise be a
// hand-kept list.

// currentCurrencies are the codes of the currencies that are legal tender
// somewhere today, by CLDR.
var currentCurrencies = func() map[string]bool {
	m := map[string]bool{}
	for it := currency.Query(); it.Next(); {
		m[it.Unit().String()] = true
	}
	return m
}()

// CheckCurrency returns code as stored (upper case) when it is the ISO
// 4217 code of a currency in use today; else 400 invalid_goal.
func CheckCurrency(code string) (string, error) {
	c := strings.ToUpper(strings.TrimSpace(code))
	if !currentCurrencies[c] {
		return "", fault.Errorf(fault.InvalidGoal, "currency must be the ISO 4217 code of a currency in use, such as \"USD\" or \"EUR\"; %q is not one", code)
	}
	return c, nil
}
