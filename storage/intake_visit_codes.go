package storage

import (
	"fmt"
	"strings"
)

// A visit's landing agent (browser, OS, device type) is stored as one
// small integer, agent = browser + 32*os + 512*device, each the index of
// its value in the lists below (0: none), when all three are on them
// (docs/intake.md#visits, docs/storage.md#event-bytes). The lists are the
// User-Agent parser's names (privacy.ParseAgent) and nothing else, the same for
// every site: they hold no one's values, so erasure has nothing to clean in
// them. Migration 0016 decodes them in the generated columns browser, os and
// device; the lists are fixed: a code never changes its meaning, and a
// value that is not on them is stored as text.
var (
	agentBrowsers = []string{"", "Chrome", "Safari", "Mobile Safari", "Firefox", "Edge", "Opera", "Opera Mini", "Samsung Browser",
		"Android Browser", "IE", "Vivaldi", "Amazon Silk", "Falkon", "Nintendo Browser", "Yandex Browser", "Huawei Browser"}
	agentOSes    = []string{"", "Windows", "macOS", "iOS", "Android", "Linux", "ChromeOS", "FreeBSD", "OpenBSD"}
	agentDevices = []string{"", "desktop", "mobile", "tablet", "other"}
)

// agentCode is the code of a landing's browser, OS and device type ("" is
// none), or false when one of them is not on its list.
func agentCode(browser, os, device string) (int64, bool) {
	b, o, d := indexOf(agentBrowsers, browser), indexOf(agentOSes, os), indexOf(agentDevices, device)
	if b < 0 || o < 0 || d < 0 {
		return 0, false
	}
	return int64(b + 32*o + 512*d), true
}

func indexOf(list []string, v string) int {
	for i, s := range list {
		if s == v {
			return i
		}
	}
	return -1
}

// agentCodeSQL is agentCode in SQL over the text columns of a row stored
// before migration 0016: NULL when a value is not on its list.
func agentCodeSQL(browser, os, device string) string {
	code := func(col string, list []string, mul int) string {
		var b strings.Builder
		fmt.Fprintf(&b, "CASE WHEN %s IS NULL THEN 0", col)
		for i, v := range list[1:] {
			fmt.Fprintf(&b, " WHEN %s = '%s' THEN %d", col, v, (i+1)*mul)
		}
		return b.String() + " END"
	}
	return "(" + code(browser, agentBrowsers, 1) + " + " + code(os, agentOSes, 32) + " + " + code(device, agentDevices, 512) + ")"
}
