module github.com/retrykit/retry

go 1.25

require go.uber.org/goleak v1.3.0
