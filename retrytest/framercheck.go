package retrytest

import (
	"bufio"
	"bytes"
	"fmt"
	"testing/iotest"
)

// Exchange is one message a client sends and the server's whole reply to
// it, as raw bytes, for [CheckFramer]. Reply is empty for a message that
// has no answer of its own.
type Exchange struct {
	Message, Reply []byte
}

// CheckFramer reports whether the Framers of p split a connection as a
// [Proxy] needs: fed the exchanges' messages back to back, Next returns
// each message whole and no more, in order; fed the replies back to back,
// Reply returns each reply whole and no more. Each side is read three
// ways: all at once, one byte per read, and through a 16-byte buffer
// (which catches a Framer that keeps a view of bufio's buffer across
// reads). It returns nil, or an error naming the first exchange that
// failed. Give it a conversation of your protocol, with messages and
// replies larger than 16 bytes among them.
func CheckFramer(p Protocol, exchanges ...Exchange) error {
	var msgs, replies []byte
	for _, e := range exchanges {
		msgs = append(msgs, e.Message...)
		replies = append(replies, e.Reply...)
	}
	for _, way := range []struct {
		name string
		open func([]byte) *bufio.Reader
	}{
		{"all at once", func(b []byte) *bufio.Reader { return bufio.NewReaderSize(bytes.NewReader(b), len(b)+16) }},
		{"one byte per read", func(b []byte) *bufio.Reader { return bufio.NewReader(iotest.OneByteReader(bytes.NewReader(b))) }},
		{"a 16-byte buffer", func(b []byte) *bufio.Reader { return bufio.NewReaderSize(bytes.NewReader(b), 16) }},
	} {
		f := p()
		cr, sr := way.open(msgs), way.open(replies)
		for i, e := range exchanges {
			msg, name, err := f.Next(cr)
			if err != nil {
				return fmt.Errorf("retrytest: CheckFramer, %s: Next of message %d: %w", way.name, i, err)
			}
			if !bytes.Equal(msg, e.Message) {
				return fmt.Errorf("retrytest: CheckFramer, %s: Next of message %d returned %q; want %q", way.name, i, clip(msg), clip(e.Message))
			}
			reply, err := f.Reply(sr, name)
			if err != nil {
				return fmt.Errorf("retrytest: CheckFramer, %s: Reply to message %d (%q): %w", way.name, i, name, err)
			}
			if !bytes.Equal(reply, e.Reply) {
				return fmt.Errorf("retrytest: CheckFramer, %s: Reply to message %d (%q) returned %q; want %q", way.name, i, name, clip(reply), clip(e.Reply))
			}
		}
		if cr.Buffered() > 0 || sr.Buffered() > 0 {
			return fmt.Errorf("retrytest: CheckFramer, %s: bytes left after the last exchange", way.name)
		}
	}
	return nil
}

// clip shortens b for an error message.
func clip(b []byte) []byte {
	if len(b) > 64 {
		return append(b[:60:60], "..."...)
	}
	return b
}
