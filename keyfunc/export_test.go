package keyfunc

// The key format's numbers, for the tests of package keyfunc_test. They are
// documented in prose, not exported: no user needs them in code.
const (
	MaxKeyLen         = maxKeyLen
	HashedKeyPrefix   = hashedKeyPrefix
	DefaultIPv6Prefix = defaultIPv6Prefix
)
