package pgfault

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/retrykit/retry/retrytest"
)

// Names the Framer gives the untyped first messages; a simple query is
// named by its first word in upper case ("BEGIN", "COMMIT"), any other
// typed message by its type byte ("P" for Parse, "S" for Sync).
const (
	NameStartup = "(startup)"
	NameCancel  = "(cancel)"
	NameSSL     = "(encryption request)"
)

// Protocol codes of the untyped first messages.
const (
	codeCancel = 80877102
	codeSSL    = 80877103
	codeGSSENC = 80877104
)

// maxMessage bounds one message's length, against a garbled stream.
const maxMessage = 1 << 30

// errEnded ends a connection after a CancelRequest, which the server
// answers by closing.
var errEnded = errors.New("pgfault: connection ended")

// Postgres is the [retrytest.Protocol] of PostgreSQL (wire protocol
// version 3, without TLS): first the untyped messages (SSL or GSS
// encryption requests, which must be refused, then a startup message or a
// CancelRequest), then typed messages. The reply to a startup message or
// a password message is read up to ReadyForQuery, an error, or the next
// authentication request; to a Query, a Sync, a FunctionCall or the end of
// a COPY, up to ReadyForQuery (or a CopyInResponse); the other extended
// query messages have no reply of their own. A client that sends Flush
// and waits for the answers before a Sync is not supported.
func Postgres() retrytest.Framer { return &pgFramer{} }

type pgFramer struct {
	typed bool // past the untyped first messages
	ended bool // after a CancelRequest
}

func (f *pgFramer) Next(r *bufio.Reader) ([]byte, string, error) {
	if f.ended {
		return nil, "", errEnded
	}
	if f.typed {
		msg, err := readTyped(r, nil)
		if err != nil {
			return nil, "", err
		}
		if msg[0] == 'Q' {
			return msg, queryName(msg[5:]), nil
		}
		return msg, string(msg[:1]), nil
	}
	var h [4]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		return nil, "", err
	}
	n := binary.BigEndian.Uint32(h[:])
	if n < 8 || n > maxMessage {
		return nil, "", fmt.Errorf("pgfault: first message of %d bytes", n)
	}
	msg, err := readBody(r, h[:], int(n)-4)
	if err != nil {
		return nil, "", err
	}
	switch binary.BigEndian.Uint32(msg[4:8]) {
	case codeSSL, codeGSSENC:
		return msg, NameSSL, nil
	case codeCancel:
		return msg, NameCancel, nil
	}
	f.typed = true
	return msg, NameStartup, nil
}

func (f *pgFramer) Reply(r *bufio.Reader, name string) ([]byte, error) {
	switch name {
	case NameSSL:
		b, err := r.ReadByte()
		if err != nil {
			return nil, err
		}
		if b != 'N' {
			return nil, errors.New("pgfault: encryption is not supported")
		}
		return []byte{b}, nil
	case NameCancel:
		// The server answers by closing; so does the proxy, after Next.
		f.ended = true
		_, err := io.Copy(io.Discard, r)
		return []byte{}, err
	case NameStartup, "p":
		return readReply(r, true)
	case "P", "B", "D", "E", "C", "H", "d", "X":
		return nil, nil
	}
	return readReply(r, false)
}

// readReply reads server messages up to ReadyForQuery or a CopyInResponse
// or CopyBothResponse; during authentication also up to an error or an
// authentication request that waits for the client.
func readReply(r *bufio.Reader, auth bool) ([]byte, error) {
	var out []byte
	for {
		at := len(out)
		var err error
		if out, err = readTyped(r, out); err != nil {
			return nil, err
		}
		switch out[at] {
		case 'Z', 'G', 'W':
			return out, nil
		case 'E':
			if auth {
				return out, nil
			}
		case 'R':
			if auth && len(out) >= at+9 {
				if code := binary.BigEndian.Uint32(out[at+5:]); code != 0 && code != 12 {
					return out, nil // the server waits for the client's answer
				}
			}
		}
	}
}

// readTyped appends one typed message (type byte, length, body) to dst.
func readTyped(r *bufio.Reader, dst []byte) ([]byte, error) {
	var h [5]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		return nil, err
	}
	n := binary.BigEndian.Uint32(h[1:])
	if n < 4 || n > maxMessage {
		return nil, errors.New("pgfault: bad message length")
	}
	return readBody(r, append(dst, h[:]...), int(n)-4)
}

// readBody appends n bytes from r to dst, growing with the data read
// rather than with the declared length.
func readBody(r *bufio.Reader, dst []byte, n int) ([]byte, error) {
	for n > 0 {
		chunk := min(n, 32<<10)
		at := len(dst)
		dst = append(dst, make([]byte, chunk)...)
		if _, err := io.ReadFull(r, dst[at:]); err != nil {
			return nil, err
		}
		n -= chunk
	}
	return dst, nil
}

// queryName returns the first word of the simple query q (NUL-terminated)
// in upper case: "BEGIN", "START" (a START TRANSACTION), "COMMIT".
func queryName(q []byte) string {
	i := 0
	for i < len(q) && (q[i] == ' ' || q[i] == '\t' || q[i] == '\n' || q[i] == '\r') {
		i++
	}
	j := i
	for j < len(q) && (q[j]|0x20 >= 'a' && q[j]|0x20 <= 'z') {
		j++
	}
	b := make([]byte, j-i)
	for k := range b {
		b[k] = q[i+k] &^ 0x20
	}
	return string(b)
}
