// Package chromiumtest starts Debian's chromium headless for the browser
// tests (the tracking script's and Segment's browser SDK's): one place for
// the flags this machine's closed network needs.
package chromiumtest

import (
	"context"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// DesktopUA replaces headless Chrome's own User-Agent, which names
// HeadlessChrome and is dropped as a bot where the bot filter is on.
const DesktopUA = "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0.0.0 Safari/537.36"

// Browser starts chromium headless with a fresh profile and DesktopUA, and
// returns a chromedp context that ends with the test (or after 90 s). A
// missing chromium skips the test, except in CI (CI set), where .ci/run
// installs it and its absence fails the test. extra adds flags of the
// test's own (a host mapping, say).
func Browser(t testing.TB, extra ...chromedp.ExecAllocatorOption) context.Context {
	t.Helper()
	var chrome string
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			chrome = p
			break
		}
	}
	if chrome == "" {
		if os.Getenv("CI") != "" {
			t.Fatal("chromium is not installed; .ci/run installs Debian's chromium package")
		}
		t.Skip("chromium is not installed (apt-get install chromium)")
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chrome),
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.UserAgent(DesktopUA),
		chromedp.UserDataDir(t.TempDir()),
		// Without these, chromium's background connections are refused by
		// the machine's closed network, many at a time.
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("no-first-run", true),
	)
	opts = append(opts, extra...)
	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelCtx := chromedp.NewContext(alloc)
	ctx, cancelTimeout := context.WithTimeout(ctx, 90*time.Second)
	t.Cleanup(func() { cancelTimeout(); cancelCtx(); cancelAlloc() })
	return ctx
}
