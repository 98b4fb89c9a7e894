package storage

import (
	"fmt"
	"testing"
)

// TestMetricChange is Plausible's change of a metric between the ranges.
func TestMetricChange(t *testing.T) {
	t.Parallel()
	show := func(v *float64) string {
		if v == nil {
			return "null"
		}
		return fmt.Sprint(*v)
	}
	for _, c := range []struct {
		metric      string
		before, now float64
		want        string
	}{
		{MetricVisitors, 4, 6, "50"},
		{MetricVisitors, 3, 2, "-33"},
		{MetricVisitors, 0, 5, "100"},
		{MetricVisitors, 0, 0, "0"},
		{MetricBounceRate, 40, 55, "15"},
		{MetricBounceRate, 0, 55, "null"},
	} {
		if got := show(metricChange(c.metric, c.before, c.now)); got != c.want {
			t.Errorf("%s %v to %v: got %s, want %s", c.metric, c.before, c.now, got, c.want)
		}
	}
}
