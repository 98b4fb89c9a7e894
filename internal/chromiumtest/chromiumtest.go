// Package chromiumtest starts Debian's chromium headless for the browser
// tests (the tracking script's and Segment's browser SDK's): one place for
// the flags this machine's closed network needs, and one browser per test
// binary where the package's TestMain is Main.
package chromiumtest

import (
	"context"
	"os"
	"os/exec"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// DesktopUA replaces headless Chrome's own User-Agent, which names
// HeadlessChrome and is dropped as a bot where the bot filter is on.
const DesktopUA = "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0.0.0 Safari/537.36"

// shared is the browser of this test binary when Main runs: starting one
// per test cost about 0.5 CPU-s, for some twenty tests
// (docs/development.md#test-run-times).
var shared struct {
	mu      sync.Mutex
	main    bool            // Main runs, and stops the browser at the end
	browser context.Context // its first tab's: the browser lives as long as it
	stop    func()
	dir     string
}

// Main is a TestMain for a package whose browser tests share one chromium:
// it runs the tests, then stops the browser and removes its profile, then
// runs cleanups (a test database's template, say).
func Main(m *testing.M, cleanups ...func()) {
	shared.mu.Lock()
	shared.main = true
	shared.mu.Unlock()
	code := m.Run()
	shared.mu.Lock()
	stopShared()
	shared.mu.Unlock()
	for _, f := range cleanups {
		f()
	}
	os.Exit(code)
}

// Browser returns a chromedp context for t that ends with the test (or
// after 90 s): chromium headless with DesktopUA. Under Main, the context
// is a tab in a browser context of its own (cookies, storage and cache
// apart, as a fresh profile's) of the one browser the package's tests
// share; otherwise, or when extra gives flags of the test's own (a host
// mapping, say), a browser of its own with a fresh profile. A missing
// chromium skips the test, except in CI (CI set), where .ci/run installs
// it and its absence fails the test.
func Browser(t testing.TB, extra ...chromedp.ExecAllocatorOption) context.Context {
	t.Helper()
	chrome := executable(t)
	shared.mu.Lock()
	if !shared.main || len(extra) > 0 {
		shared.mu.Unlock()
		dir := t.TempDir()
		alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(), append(options(chrome, dir), extra...)...)
		ctx, cancelCtx := chromedp.NewContext(alloc)
		ctx, cancelTimeout := context.WithTimeout(ctx, 90*time.Second)
		t.Cleanup(func() { cancelTimeout(); cancelCtx(); cancelAlloc() })
		return ctx
	}
	defer shared.mu.Unlock()
	// A browser that crashed or was closed is started again.
	if shared.browser == nil || shared.browser.Err() != nil {
		stopShared()
		dir, err := os.MkdirTemp("", "tally-chromium-")
		if err != nil {
			t.Fatal(err)
		}
		alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(), options(chrome, dir)...)
		browser, cancelBrowser := chromedp.NewContext(alloc)
		shared.browser, shared.dir = browser, dir
		shared.stop = func() { cancelBrowser(); cancelAlloc() }
		if err := chromedp.Do(browser); err != nil {
			stopShared()
			t.Fatalf("starting chromium: %v", err)
		}
	}
	ctx, cancelCtx := chromedp.NewContext(shared.browser, chromedp.WithNewBrowserContext())
	ctx, cancelTimeout := context.WithTimeout(ctx, 90*time.Second)
	t.Cleanup(func() { cancelTimeout(); cancelCtx() })
	return ctx
}

// stopShared stops the shared browser (shared.mu held) and removes its
// profile.
func stopShared() {
	if shared.stop != nil {
		shared.stop()
	}
	if shared.dir != "" {
		os.RemoveAll(shared.dir)
	}
	shared.browser, shared.stop, shared.dir = nil, nil, ""
}

// executable is chromium's path; without it t is skipped, or fails in CI.
func executable(t testing.TB) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CI") != "" {
		t.Fatal("chromium is not installed; .ci/run installs Debian's chromium package")
	}
	t.Skip("chromium is not installed (apt-get install chromium)")
	return ""
}

// options are the flags of every browser the tests start, with its
// profile in dir.
func options(chrome, dir string) []chromedp.ExecAllocatorOption {
	return append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chrome),
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.UserAgent(DesktopUA),
		chromedp.UserDataDir(dir),
		// Without these, chromium's background connections are refused by
		// the machine's closed network, many at a time.
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("no-first-run", true),
	)
}
