package core

// SweepForTest runs l's eviction of idle keys now, as its janitor does, for
// tests outside the package (coretest.Suite.Sweep).
func SweepForTest(l *MemoryLimiter) { l.sweep() }

// RaceEnabled reports whether the race detector, which allocates, is on.
const RaceEnabled = raceEnabled
