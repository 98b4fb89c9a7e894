package servertest_test

import (
	"fmt"
	"strings"

	"github.com/tally-analytics/tally/server/servertest"
)

func stringsReader(s string) *strings.Reader { return strings.NewReader(s) }

// Start a fake backend, send it what an SDK would send, and ask it what
// happened to each event.
func ExampleStart() {
	srv, err := servertest.Start()
	if err != nil {
		panic(err)
	}
	defer srv.Close()

	answer, err := srv.Send(
		map[string]any{"id": "3f2504e0-4f89-41d3-9a0c-0305e82c3301", "site_id": srv.SiteID, "anon_id": "a1", "type": "pageview"},
		map[string]any{"id": "3f2504e0-4f89-41d3-9a0c-0305e82c3301", "site_id": srv.SiteID, "anon_id": "a1", "type": "pageview"},
	)
	if err != nil {
		panic(err)
	}
	fmt.Printf("accepted %d, duplicates %d\n", answer.Accepted, answer.Duplicates)

	events, _ := srv.Events()
	fmt.Println("stored:", len(events), events[0].Type)

	for _, d := range srv.Decisions(servertest.Filter{}) {
		fmt.Println(d.EventID, d.Outcome)
	}
	// Output:
	// accepted 1, duplicates 1
	// stored: 1 pageview
	// 3f2504e0-4f89-41d3-9a0c-0305e82c3301 duplicate
	// 3f2504e0-4f89-41d3-9a0c-0305e82c3301 accepted
}
