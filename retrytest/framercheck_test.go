package retrytest_test

import (
	"bufio"
	"strconv"
	"strings"
	"testing"

	"github.com/retrykit/retry/retrytest"
)

func resp(args ...string) []byte {
	var b strings.Builder
	b.WriteString("*" + strconv.Itoa(len(args)) + "\r\n")
	for _, a := range args {
		b.WriteString("$" + strconv.Itoa(len(a)) + "\r\n" + a + "\r\n")
	}
	return []byte(b.String())
}

// lineFramer takes a message and a reply to be one line each: wrong for
// RESP's bulk strings.
type lineFramer struct{}

func (lineFramer) Next(r *bufio.Reader) ([]byte, string, error) {
	b, err := r.ReadBytes('\n')
	return b, "", err
}

func (lineFramer) Reply(r *bufio.Reader, _ string) ([]byte, error) { return r.ReadBytes('\n') }

// TestCheckFramer: RESP passes on a conversation with values larger than
// the checker's 16-byte buffer; a Framer that reads lines fails, and the
// error names the exchange.
func TestCheckFramer(t *testing.T) {
	big := strings.Repeat("|", 100)
	conv := []retrytest.Exchange{
		{resp("PING"), []byte("+PONG\r\n")},
		{resp("SET", "k", big), []byte("+OK\r\n")},
		{resp("GET", "k"), []byte("$100\r\n" + big + "\r\n")},
		{[]byte("PING\r\n"), []byte("+PONG\r\n")},
		{resp("HGETALL", "h"), []byte("%1\r\n+field\r\n*2\r\n:1\r\n$3\r\nabc\r\n")},
	}
	if err := retrytest.CheckFramer(retrytest.RESP, conv...); err != nil {
		t.Fatal(err)
	}
	err := retrytest.CheckFramer(func() retrytest.Framer { return lineFramer{} }, conv...)
	if err == nil || !strings.Contains(err.Error(), "message 0") {
		t.Fatalf("a line Framer on RESP: %v; want an error at message 0", err)
	}
}
