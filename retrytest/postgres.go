package retrytest

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// The names Postgres gives the untyped first messages.
const (
	pgStartup = "(startup)"
	pgCancel  = "(cancel)"
	pgSSL     = "(encryption request)"
)

// Protocol codes of the untyped first messages.
const (
	pgCodeCancel = 80877102
	pgCodeSSL    = 80877103
	pgCodeGSSENC = 80877104
)

// pgMaxMessage bounds one message's length, against a garbled stream.
const pgMaxMessage = 1 << 30

// errPgEnded ends a connection after a CancelRequest, which the server
// answers by closing.
var errPgEnded = errors.New("retrytest: connection ended")

// Postgres is the [Protocol] of PostgreSQL (wire protocol version 3,
// without TLS: clients connect with sslmode=disable). The first messages
// are untyped: encryption requests, which the server must refuse (named
// "(encryption request)"), then a startup message ("(startup)") or a
// CancelRequest ("(cancel)"). Typed messages follow: a simple Query is
// named by its first word in upper case ("BEGIN", "START", "COMMIT"), any
// other message by its type byte ("P" Parse, "S" Sync). The reply to a
// startup or password message runs up to ReadyForQuery, an error, or an
// authentication request the client must answer; to a Query, a Sync, a
// FunctionCall or the end of a COPY, up to ReadyForQuery (or
// CopyInResponse). Parse, Bind, Describe, Execute, Close, Flush, CopyData
// and Terminate have no reply of their own, so a client that sends Flush
// and waits for answers before its Sync is not supported. A Rule that
// loses a COMMIT's reply answers AfterReply and, asked again, looks for a
// CommandComplete tagged "COMMIT" in Message.Reply.
func Postgres() Framer { return &pgFramer{} }

type pgFramer struct {
	typed bool // past the untyped first messages
	ended bool // after a CancelRequest
}

func (f *pgFramer) Next(r *bufio.Reader) ([]byte, string, error) {
	if f.ended {
		return nil, "", errPgEnded
	}
	if f.typed {
		msg, err := readPgMessage(r, nil)
		if err != nil {
			return nil, "", err
		}
		if msg[0] == 'Q' {
			return msg, pgQueryName(msg[5:]), nil
		}
		return msg, string(msg[:1]), nil
	}
	var h [4]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		return nil, "", err
	}
	n := binary.BigEndian.Uint32(h[:])
	if n < 8 || n > pgMaxMessage {
		return nil, "", fmt.Errorf("retrytest: first message of %d bytes", n)
	}
	msg, err := appendRead(r, h[:], int(n)-4)
	if err != nil {
		return nil, "", err
	}
	switch binary.BigEndian.Uint32(msg[4:8]) {
	case pgCodeSSL, pgCodeGSSENC:
		return msg, pgSSL, nil
	case pgCodeCancel:
		return msg, pgCancel, nil
	}
	f.typed = true
	return msg, pgStartup, nil
}

func (f *pgFramer) Reply(r *bufio.Reader, name string) ([]byte, error) {
	switch name {
	case pgSSL:
		b, err := r.ReadByte()
		if err != nil {
			return nil, err
		}
		if b != 'N' {
			return nil, errors.New("retrytest: encryption is not supported")
		}
		return []byte{b}, nil
	case pgCancel:
		// The server answers by closing; so does the proxy, after Next.
		f.ended = true
		_, err := io.Copy(io.Discard, r)
		return []byte{}, err
	case pgStartup, "p":
		return readPgReply(r, true)
	case "P", "B", "D", "E", "C", "H", "d", "X":
		return nil, nil
	}
	return readPgReply(r, false)
}

// readPgReply reads server messages up to ReadyForQuery or a CopyInResponse
// or CopyBothResponse; during authentication also up to an error or an
// authentication request that waits for the client.
func readPgReply(r *bufio.Reader, auth bool) ([]byte, error) {
	var out []byte
	for {
		at := len(out)
		var err error
		if out, err = readPgMessage(r, out); err != nil {
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

// readPgMessage appends one typed message (type byte, length, body) to dst.
func readPgMessage(r *bufio.Reader, dst []byte) ([]byte, error) {
	var h [5]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		return nil, err
	}
	n := binary.BigEndian.Uint32(h[1:])
	if n < 4 || n > pgMaxMessage {
		return nil, errors.New("retrytest: bad message length")
	}
	return appendRead(r, append(dst, h[:]...), int(n)-4)
}

// appendRead appends n bytes from r to dst, growing with the data
// actually read rather than with a declared length.
func appendRead(r io.Reader, dst []byte, n int) ([]byte, error) {
	for n > 0 {
		chunk := min(n, 32<<10)
		at := len(dst)
		dst = append(dst, make([]byte, chunk)...)
		if _, err := io.ReadFull(r, dst[at:]); err != nil {
			return dst, err
		}
		n -= chunk
	}
	return dst, nil
}

// pgQueryName returns the first word of the simple query q (NUL-terminated)
// in upper case: "BEGIN", "START" (a START TRANSACTION), "COMMIT".
func pgQueryName(q []byte) string {
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
