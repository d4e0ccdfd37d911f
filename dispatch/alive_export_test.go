package dispatch

import "time"

// SetAliveEvery sets how often a waiting caller shows a sign of life on its
// request (alive.go) and returns a func that puts the default back.
func SetAliveEvery(d time.Duration) (restore func()) {
	old := aliveEvery
	aliveEvery = d
	return func() { aliveEvery = old }
}
