module github.com/retrykit/retry/examples/metastable

go 1.26.0

require github.com/retrykit/retry v0.1.0
