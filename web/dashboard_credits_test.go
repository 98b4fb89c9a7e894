package web

import (
	"io/fs"
	"strings"
	"testing"
)

// TestDashboardCreditsGeoIP: the dashboard shows countries of the built-in
// database, so it links to DB-IP as the database's licence asks of pages
// that show its results (docs/configuration.md#geoip).
func TestDashboardCreditsGeoIP(t *testing.T) {
	b, err := fs.ReadFile(Dashboard(), "index.html")
	if err != nil {
		t.Fatal(err)
	}
	if want := `<a href="https://db-ip.com">IP Geolocation by DB-IP</a>`; !strings.Contains(string(b), want) {
		t.Fatalf("got no %s in the dashboard's index.html", want)
	}
}
