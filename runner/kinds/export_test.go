package kinds

import "time"

// SetHTTPDefaultTimeout shortens the http kind's default timeout for a
// test that is not parallel (parallel tests start after it has ended); it
// returns the function that restores it.
func SetHTTPDefaultTimeout(d time.Duration) (restore func()) {
	old := httpDefaultTimeout
	httpDefaultTimeout = d
	return func() { httpDefaultTimeout = old }
}
