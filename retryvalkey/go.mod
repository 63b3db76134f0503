module github.com/retrykit/retry/retryvalkey

go 1.26.0

require (
	github.com/retrykit/retry v0.1.0
	github.com/valkey-io/valkey-go v1.0.80
	go.uber.org/goleak v1.3.0
)

require golang.org/x/sys v0.50.0 // indirect

replace github.com/retrykit/retry => ../
