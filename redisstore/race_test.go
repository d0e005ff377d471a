//go:build race

package redisstore_test

// raceEnabled: the race detector slows everything several times over.
const raceEnabled = true
