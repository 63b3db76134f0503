package retrytest

import (
	"bufio"
	"bytes"
	"strconv"
	"strings"
	"testing"
)

func itoa(n int) string { return strconv.Itoa(n) }

func TestReadValueRESP3(t *testing.T) {
	for _, in := range []string{
		"+OK\r\n", "-ERR x\r\n", ":12\r\n", "$3\r\nabc\r\n", "$-1\r\n", "_\r\n", "#t\r\n", ",1.5\r\n",
		"*2\r\n$1\r\na\r\n:1\r\n", "%1\r\n+k\r\n*1\r\n+v\r\n", "~1\r\n+x\r\n", "|1\r\n+a\r\n+b\r\n:7\r\n",
		"=7\r\ntxt:abc\r\n", "!3\r\nERR\r\n",
	} {
		got, err := readValue(bufio.NewReader(strings.NewReader(in+"+NEXT\r\n")), nil)
		if err != nil || !bytes.Equal(got, []byte(in)) {
			t.Errorf("readValue(%q) = %q, %v", in, got, err)
		}
	}
}

// pipes returns n arrays of one bulk string of size bytes of '|', in
// RESP, the reply an EVAL returning {{s}, {s}, ...} gets, together with
// its outer array header.
func pipes(n, size int) string {
	var b strings.Builder
	b.WriteString("*" + itoa(n) + "\r\n")
	s := strings.Repeat("|", size)
	for range n {
		b.WriteString("*1\r\n$" + itoa(size) + "\r\n" + s + "\r\n")
	}
	return b.String()
}

// TestReadValueLarge: a value larger than the bufio.Reader's buffer reads
// as one value, not more. The reader's buffer is refilled while an
// array's elements are read, so the array's header line, returned by
// ReadSlice, is overwritten; when the byte where its type was became a
// '|' (frequent in a COMMAND reply, which names subcommands "config|set"),
// the array was taken for an attribute and one more value was read: the
// proxy waited for a reply the server never sent.
func TestReadValueLarge(t *testing.T) {
	for _, in := range []string{
		pipes(200, 1000),
		"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$5000\r\n" + strings.Repeat("|", 5000) + "\r\n",
		"|1\r\n+a\r\n+b\r\n" + pipes(10, 5000),
		"%2\r\n+a\r\n" + pipes(10, 1000) + "+b\r\n" + pipes(10, 1000),
	} {
		got, err := readValue(bufio.NewReader(strings.NewReader(in+"+NEXT\r\n")), nil)
		if err != nil || !bytes.Equal(got, []byte(in)) {
			t.Errorf("readValue of a %d-byte value: %d bytes, %v; want the value", len(in), len(got), err)
		}
	}
	cmd := "*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$5000\r\n" + strings.Repeat("|", 5000) + "\r\n"
	raw, name, err := readCommand(bufio.NewReader(strings.NewReader(cmd + "*1\r\n$4\r\nPING\r\n")))
	if err != nil || string(raw) != cmd || name != "set" {
		t.Errorf("readCommand of a %d-byte SET: %d bytes, %q, %v; want the SET", len(cmd), len(raw), name, err)
	}
}

// FuzzReadValue: the RESP reader never panics, never reads past one value,
// and a value it accepts reads back the same.
func FuzzReadValue(f *testing.F) {
	for _, s := range []string{"+OK\r\n", "*2\r\n$1\r\na\r\n:1\r\n", "%1\r\n+k\r\n*1\r\n+v\r\n", "|1\r\n+a\r\n+b\r\n:7\r\n", "$-1\r\n", "*-1\r\n", "$99999999999\r\n"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		got, err := readValue(bufio.NewReader(bytes.NewReader(in)), nil)
		if err != nil {
			return
		}
		if !bytes.HasPrefix(in, got) {
			t.Fatalf("read %q, not a prefix of %q", got, in)
		}
		again, err := readValue(bufio.NewReader(bytes.NewReader(got)), nil)
		if err != nil || !bytes.Equal(again, got) {
			t.Fatalf("re-read %q: %q, %v", got, again, err)
		}
	})
}
