module github.com/retrykit/retry/retryvalkey

go 1.26.0

replace github.com/retrykit/retry => ../
