package web_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// screenshotBudget bounds each of the docs' dashboard screenshots.
const screenshotBudget = 100 << 10

// The docs' screenshots of the dashboard (issue 31: realtime, map, goal
// filter, comparison at 1280 and 390 px) exist, are small, and
// docs/dashboard.md links each; TestDashboardViews writes them.
func TestDashboardScreenshots(t *testing.T) {
	page, err := os.ReadFile(filepath.Join("..", "docs", "dashboard.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, view := range []string{"realtime", "map", "goal", "comparison"} {
		for _, width := range []string{"1280", "390"} {
			name := "dashboard-" + view + "-" + width + ".png"
			fi, err := os.Stat(filepath.Join("..", "docs", name))
			if err != nil {
				t.Errorf("%s: %v (TALLY_SCREENSHOTS=1 go test ./web -run TestDashboardViews writes it)", name, err)
				continue
			}
			if fi.Size() > screenshotBudget {
				t.Errorf("%s: got %d bytes, want at most %d", name, fi.Size(), screenshotBudget)
			}
			if !strings.Contains(string(page), "("+name+")") {
				t.Errorf("docs/dashboard.md does not link %s", name)
			}
		}
	}
}
