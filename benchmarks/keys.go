package benchmarks

import "strconv"

// ClientKey returns the i-th of a family of distinct keys shaped like the
// IPv4 client addresses a per-IP limit sees ("10.0.1.2"), so that every
// library stores keys of a realistic length. Each call builds a new string.
func ClientKey(i int) string {
	b := make([]byte, 0, 15)
	b = append(b, "10."...)
	b = strconv.AppendInt(b, int64(i>>16&0xff), 10)
	b = append(b, '.')
	b = strconv.AppendInt(b, int64(i>>8&0xff), 10)
	b = append(b, '.')
	b = strconv.AppendInt(b, int64(i&0xff), 10)
	return string(b)
}

// ClientKeys returns the first n keys of ClientKey, built once so that the
// benchmarks pick keys without building strings.
func ClientKeys(n int) []string {
	keys := make([]string, n)
	for i := range keys {
		keys[i] = ClientKey(i)
	}
	return keys
}

// Rand is a xorshift64* generator: a few nanoseconds, no lock and no
// allocation, so that each benchmark goroutine picks its keys with its own
// copy and the pick costs the same under every library.
type Rand uint64

// NewRand returns a generator seeded from seed (any value, zero included).
func NewRand(seed uint64) Rand { return Rand(seed*0x9E3779B97F4A7C15 | 1) }

// Intn returns a pseudo-random int in [0, n), for n < 2^32.
func (r *Rand) Intn(n int) int {
	x := uint64(*r)
	x ^= x >> 12
	x ^= x << 25
	x ^= x >> 27
	*r = Rand(x)
	return int(((x * 2685821657736338717) >> 32) * uint64(n) >> 32)
}
