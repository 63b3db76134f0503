package retrygrpc_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/retrygrpc"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
)

// A copy failing with a non-fatal code after the server sent response
// headers commits the call (A6): it ends with that status, the copy in
// flight cancelled, no further copy sent. The caller's cancel ends every
// copy at once.
func TestUnaryHedgeFailureAfterHeadersAndCancel(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h, _ := retry.NewHedger(retry.HedgeConfig{FixedDelay: 10 * time.Millisecond})
		s := &echoServer{unary: func(ctx context.Context, n int, in string) (string, error) {
			if n == 1 {
				<-ctx.Done()
				return "", ctx.Err()
			}
			grpc.SendHeader(ctx, metadata.Pairs("k", "v"))
			return "", status.Error(codes.Unavailable, "after headers")
		}}
		cc := serveInBubble(t, s, grpc.WithChainUnaryInterceptor(unaryInterceptor(t, retry.Policy{}, retrygrpc.WithHedging(h))))
		start := time.Now()
		_, err := callUnary(t.Context(), cc, methodUnary)
		if status.Code(err) != codes.Unavailable || time.Since(start) != 10*time.Millisecond || s.Calls(methodUnary) != 2 {
			t.Errorf("got %v after %v, %d copies; want Unavailable at 10ms from 2 copies", err, time.Since(start), s.Calls(methodUnary))
		}

		s2 := &echoServer{unary: func(ctx context.Context, n int, in string) (string, error) {
			<-ctx.Done()
			return "", ctx.Err()
		}}
		cc2 := serveInBubble(t, s2, grpc.WithChainUnaryInterceptor(unaryInterceptor(t, retry.Policy{}, retrygrpc.WithHedging(h))))
		ctx, cancel := context.WithCancel(t.Context())
		time.AfterFunc(25*time.Millisecond, cancel)
		start = time.Now()
		_, err = callUnary(ctx, cc2, methodUnary)
		if status.Code(err) != codes.Canceled || time.Since(start) != 25*time.Millisecond || s2.Calls(methodUnary) != 3 {
			t.Errorf("cancelled: %v after %v, %d copies; want Canceled at 25ms, 3 copies", err, time.Since(start), s2.Calls(methodUnary))
		}
	})
}

// The caller's grpc.Header and grpc.Trailer options receive the winner's
// metadata, not that of a loser that ended (cancelled) after it; copies
// never write them at once.
func TestUnaryHedgeCallerHeaderAndTrailerAreTheWinners(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h, _ := retry.NewHedger(retry.HedgeConfig{FixedDelay: 10 * time.Millisecond})
		s := &echoServer{unary: func(ctx context.Context, n int, in string) (string, error) {
			if n == 1 {
				grpc.SendHeader(ctx, metadata.Pairs("copy", "loser"))
				<-ctx.Done()
				return "", ctx.Err()
			}
			grpc.SendHeader(ctx, metadata.Pairs("copy", "winner"))
			grpc.SetTrailer(ctx, metadata.Pairs("copy-trailer", "winner"))
			return in, nil
		}}
		cc := serveInBubble(t, s, grpc.WithChainUnaryInterceptor(unaryInterceptor(t, retry.Policy{}, retrygrpc.WithHedging(h))))
		var (
			header, trailer metadata.MD
			pr              peer.Peer
		)
		if _, err := callUnary(t.Context(), cc, methodUnary, grpc.Header(&header), grpc.Trailer(&trailer), grpc.Peer(&pr)); err != nil {
			t.Fatal(err)
		}
		if pr.Addr == nil {
			t.Error("the caller's grpc.Peer was not set")
		}
		if got, gotT := header.Get("copy"), trailer.Get("copy-trailer"); len(got) != 1 || got[0] != "winner" || len(gotT) != 1 || gotT[0] != "winner" {
			t.Errorf("caller's header %v, trailer %v; want the winner's", header, trailer)
		}
	})
}
