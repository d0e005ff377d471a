package grpcmw

// RetryOnce is UnaryClientInterceptor with the wait given, so that the
// tests can see the delays it waits without waiting them.
var RetryOnce = retryOnce
