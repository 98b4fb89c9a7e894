package cli

import (
	"io"
	"strings"
	"testing"
)

// The sourcemap settings: defaults, environment, flags over environment,
// dev mode without the upload rate, and a bad value stopping the start
// with exit code 2 and a message naming the setting.
func TestSourcemapSettings(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name             string
		args             []string
		env              map[string]string
		rate, files, mib int
	}{
		{"defaults", nil, nil, 30, 100, 256},
		{"environment", nil, map[string]string{"SOURCEMAP_UPLOAD_RATE": "5", "SOURCEMAP_MAX_FILES": "7", "SOURCEMAP_MAX_MIB": "9"}, 5, 7, 9},
		{"flags over environment", []string{"--sourcemap-upload-rate", "0", "--sourcemap-max-files", "0", "--sourcemap-max-mib", "1"},
			map[string]string{"SOURCEMAP_UPLOAD_RATE": "5", "SOURCEMAP_MAX_FILES": "7"}, 0, 0, 1},
		{"dev mode turns the upload rate off", []string{"--dev"}, nil, 0, 100, 256},
		{"dev mode keeps a rate that is set", []string{"--dev"}, map[string]string{"SOURCEMAP_UPLOAD_RATE": "4"}, 4, 100, 256},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := loadConfig(tt.args, func(k string) string { return tt.env[k] }, io.Discard)
			if err != nil {
				t.Fatal(err)
			}
			if c.SourcemapUploadRate != tt.rate || c.SourcemapMaxFiles != tt.files || c.SourcemapMaxMiB != tt.mib {
				t.Fatalf("got rate %d, files %d, MiB %d; want %d, %d, %d",
					c.SourcemapUploadRate, c.SourcemapMaxFiles, c.SourcemapMaxMiB, tt.rate, tt.files, tt.mib)
			}
		})
	}
	for _, bad := range []struct{ name, value string }{
		{"SOURCEMAP_UPLOAD_RATE", "-1"},
		{"SOURCEMAP_MAX_FILES", "many"},
		{"SOURCEMAP_MAX_MIB", "2.5"},
		{"SOURCEMAP_MAX_MIB", "1048577"},
	} {
		t.Run(bad.name+"="+bad.value, func(t *testing.T) {
			env := map[string]string{"DATABASE_PATH": ":memory:", "COLLECTOR_ADDR": "127.0.0.1:0", "QUERY_ADDR": "127.0.0.1:0", bad.name: bad.value}
			var stderr strings.Builder
			if code := Run(nil, func(k string) string { return env[k] }, io.Discard, &stderr); code != 2 {
				t.Fatalf("got exit %d, want 2", code)
			}
			if !strings.Contains(stderr.String(), bad.name) {
				t.Fatalf("got %q, want a message naming %s", stderr.String(), bad.name)
			}
		})
	}
}
