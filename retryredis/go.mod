module github.com/retrykit/retry/retryredis

go 1.26.0

replace github.com/retrykit/retry => ../
