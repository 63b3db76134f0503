module github.com/retrykit/retry/examples/inventory

go 1.26.0

require github.com/retrykit/retry v0.1.0

replace github.com/retrykit/retry => ../../
