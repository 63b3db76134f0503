package retryaws

import (
	"context"

	smithymiddle "github.com/aws/smithy-go/middleware"
	smithyhttp "github.com/aws/smithy-go/transport/http"
)

// AddBodyCheck is an API option (a func(*middleware.Stack) error, for
// config.WithAPIOptions, aws.Config.APIOptions or a client's
// Options.APIOptions) that tells the Retryer when a call's request body
// cannot be sent again: an io.Reader that is not an io.Seeker, such as a
// pipe, given to S3 PutObject or UploadPart. The Retryer then retries no
// attempt of the call: a failure ends it at once, with an error matching
// retry.ErrMaybeApplied when the attempt may have been applied, and
// retry.IsExhausted in every case, so that a retry.Do around the call
// does not send it again.
//
//	cfg, err := config.LoadDefaultConfig(ctx,
//		config.WithRetryer(func() aws.Retryer { return r }),
//		config.WithAPIOptions([]func(*middleware.Stack) error{retryaws.AddBodyCheck}))
//
// Without it the Retryer cannot see the body: it decides to retry and
// waits, and the SDK then ends the call with its own "failed to rewind
// transport stream" error, which matches neither. A stack without the
// SDK's retry middleware (a presign client's) is left as it is, and so
// is one that has the check already.
func AddBodyCheck(stack *smithymiddle.Stack) error {
	if _, ok := stack.Finalize.Get(retryMiddlewareID); !ok {
		return nil
	}
	if _, ok := stack.Finalize.Get(bodyCheck{}.ID()); ok {
		return nil // installed for the client and again for the call
	}
	return stack.Finalize.Insert(bodyCheck{}, retryMiddlewareID, smithymiddle.Before)
}

// retryMiddlewareID is the ID of the SDK's retry middleware (its Attempt).
const retryMiddlewareID = "Retry"

// bodyCheck marks the context of a call whose request stream cannot be
// rewound, before the SDK's retry loop, which hands that context to the
// Retryer.
type bodyCheck struct{}

func (bodyCheck) ID() string { return "retryaws.BodyCheck" }

func (bodyCheck) HandleFinalize(ctx context.Context, in smithymiddle.FinalizeInput, next smithymiddle.FinalizeHandler) (smithymiddle.FinalizeOutput, smithymiddle.Metadata, error) {
	if req, ok := in.Request.(*smithyhttp.Request); ok && req.GetStream() != nil && !req.IsStreamSeekable() {
		ctx = context.WithValue(ctx, fixedBodyKey{}, true)
	}
	return next.HandleFinalize(ctx, in)
}

type fixedBodyKey struct{}

// fixedBody reports whether AddBodyCheck found that the request body of
// the call in ctx cannot be sent again.
func fixedBody(ctx context.Context) bool {
	v, _ := ctx.Value(fixedBodyKey{}).(bool)
	return v
}
