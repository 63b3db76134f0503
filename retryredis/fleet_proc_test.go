package retryredis_test

// workerMain runs this test binary as a worker process when the
// environment asks for it, and reports whether it did.
func workerMain() bool { return false }
