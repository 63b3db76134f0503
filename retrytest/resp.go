package retrytest

import (
	"bufio"
	"fmt"
	"strconv"
	"strings"
)

// RESP is the [Protocol] of Redis and Valkey (RESP2, RESP3 and inline
// commands): each command is a message named by its lower-case name, and
// the server's reply to it is one value. It pairs each command with
// exactly one reply, so it must not be used with commands that answer more
// or less than once (SUBSCRIBE, MONITOR, CLIENT REPLY OFF). Pipelined
// commands are forwarded one at a time.
func RESP() Framer { return respFramer{} }

type respFramer struct{}

func (respFramer) Next(r *bufio.Reader) ([]byte, string, error) { return readCommand(r) }

func (respFramer) Reply(r *bufio.Reader, _ string) ([]byte, error) { return readValue(r, nil) }

// maxBulk bounds one bulk string or aggregate, so that bad input cannot
// make the proxy allocate without limit.
const maxBulk = 512 << 20

// readCommand reads one command (a RESP array of bulk strings, or an
// inline command line) and returns its raw bytes and its lower-case name.
func readCommand(r *bufio.Reader) (raw []byte, name string, err error) {
	b, err := r.Peek(1)
	if err != nil {
		return nil, "", err
	}
	if b[0] != '*' {
		line, err := r.ReadBytes('\n')
		if err != nil {
			return nil, "", err
		}
		f := strings.Fields(string(line))
		if len(f) > 0 {
			name = strings.ToLower(f[0])
		}
		return line, name, nil
	}
	var first []byte
	raw, err = readValueFirst(r, nil, &first)
	if err != nil {
		return nil, "", err
	}
	return raw, strings.ToLower(string(first)), nil
}

func readValue(r *bufio.Reader, dst []byte) ([]byte, error) {
	return readValueFirst(r, dst, nil)
}

// readValueFirst appends one whole RESP2/RESP3 value to dst. When first is
// not nil it receives the first bulk string inside the value (a command's
// name).
func readValueFirst(r *bufio.Reader, dst []byte, first *[]byte) ([]byte, error) {
	line, err := r.ReadSlice('\n')
	if err != nil {
		return dst, err
	}
	if len(line) < 3 || line[len(line)-2] != '\r' {
		return dst, fmt.Errorf("retrytest: bad RESP line %q", line)
	}
	// line is a view into r's buffer, valid only until r's next read: keep
	// the type byte, since reading the elements below may overwrite it.
	dst = append(dst, line...)
	typ, body := line[0], line[1:len(line)-2]
	switch typ {
	case '+', '-', ':', '_', '#', ',', '(':
		return dst, nil
	case '$', '!', '=':
		n, err := strconv.Atoi(string(body))
		if err != nil || n > maxBulk {
			return dst, fmt.Errorf("retrytest: bad RESP length %q", body)
		}
		if n < 0 {
			return dst, nil
		}
		start := len(dst)
		if dst, err = appendRead(r, dst, n+2); err != nil {
			return dst, err
		}
		if first != nil && *first == nil {
			*first = append([]byte(nil), dst[start:start+n]...)
		}
		return dst, nil
	case '*', '~', '>', '%', '|':
		n, err := strconv.Atoi(string(body))
		if err != nil || n > maxBulk {
			return dst, fmt.Errorf("retrytest: bad RESP count %q", body)
		}
		if typ == '%' || typ == '|' {
			n *= 2
		}
		for range max(n, 0) {
			if dst, err = readValueFirst(r, dst, first); err != nil {
				return dst, err
			}
		}
		if typ == '|' { // an attribute precedes the real reply
			return readValueFirst(r, dst, first)
		}
		return dst, nil
	}
	return dst, fmt.Errorf("retrytest: unknown RESP type %q", typ)
}
