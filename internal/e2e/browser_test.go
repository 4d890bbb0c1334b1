package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"
)

// chromiumPath returns the Chromium binary, or skips the test without it
// unless BATON_REQUIRE_CHROMIUM is set (CI sets it).
func chromiumPath(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("BATON_REQUIRE_CHROMIUM") != "" {
		t.Fatal("chromium not found (apt-get install chromium)")
	}
	t.Skip("chromium not installed (apt-get install chromium)")
	return ""
}

// newBrowser starts a headless Chromium with a fresh profile for the test
// and returns a tab's context; every action run on it is bounded by
// timeout.
func newBrowser(t *testing.T, timeout time.Duration) context.Context {
	t.Helper()
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(chromiumPath(t)),
		chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU, chromedp.NoFirstRun,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1360, 900),
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelTab := chromedp.NewContext(actx)
	t.Cleanup(func() { cancelTab(); cancelAlloc() })
	require.NoError(t, chromedp.Do(ctx)) // starts the browser, without a deadline
	tctx, cancel := context.WithTimeout(ctx, timeout)
	t.Cleanup(cancel)
	return tctx
}

// screenshot saves the page as PNG in the test's artifact directory (kept
// with go test -artifacts) and logs where. A README image (readme) goes
// under BATON_SCREENSHOTS instead when that is set: regenerate them with
// BATON_SCREENSHOTS=docs/img.
func screenshot(t *testing.T, ctx context.Context, name string, readme bool) {
	t.Helper()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	require.NoError(t, err)
	dir := os.Getenv("BATON_SCREENSHOTS")
	if dir == "" || !readme {
		dir = t.ArtifactDir()
	} else if !filepath.IsAbs(dir) {
		// go test runs in the package directory; a relative path means
		// the module's root, where the README is.
		dir = filepath.Join("..", "..", dir)
	}
	require.NoError(t, os.MkdirAll(dir, 0o755))
	path := filepath.Join(dir, name)
	require.NoError(t, os.WriteFile(path, png, 0o644))
	abs, _ := filepath.Abs(path)
	t.Logf("screenshot: %s", abs)
}
