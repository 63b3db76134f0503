package redistest

import (
	"bufio"
	"strings"
	"testing"
)

// A reply that declares a length or a count it does not carry is an error,
// not a panic or an allocation of the declared size.
func TestReadReplyHugeLength(t *testing.T) {
	for _, in := range []string{"$9223372036854775807\r\n", "$9223372036854775806\r\n", "*9223372036854775807\r\n", "$1000000000000\r\nab\r\n"} {
		if _, err := readReply(bufio.NewReader(strings.NewReader(in))); err == nil {
			t.Errorf("readReply(%q): no error", in)
		}
	}
}

// FuzzReadReply: the reply reader of Server.Do never panics on any bytes.
func FuzzReadReply(f *testing.F) {
	for _, s := range []string{"+OK\r\n", "-ERR x\r\n", ":1\r\n", "$1\r\na\r\n", "$-1\r\n", "*2\r\n$1\r\na\r\n:2\r\n", "*-1\r\n", "\r\n", "$9223372036854775807\r\n"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		readReply(bufio.NewReader(strings.NewReader(string(in))))
	})
}
