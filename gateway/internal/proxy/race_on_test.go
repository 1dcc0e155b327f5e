//go:build race

package proxy

// raceEnabled says the race detector is on: then sync.Pool drops a
// quarter of what is put back, at random, so pools miss by chance.
const raceEnabled = true
