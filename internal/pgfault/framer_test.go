package pgfault

import (
	"encoding/binary"
	"testing"

	"github.com/retrykit/retry/retrytest"
)

// msg builds a typed message.
func msg(typ byte, body string) []byte {
	b := binary.BigEndian.AppendUint32([]byte{typ}, uint32(4+len(body)))
	return append(b, body...)
}

// untyped builds a first message with the given code.
func untyped(code uint32, body string) []byte {
	b := binary.BigEndian.AppendUint32(nil, uint32(8+len(body)))
	b = binary.BigEndian.AppendUint32(b, code)
	return append(b, body...)
}

func cat(parts ...[]byte) []byte {
	var out []byte
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

func auth(code uint32, rest string) []byte {
	return msg('R', string(binary.BigEndian.AppendUint32(nil, code))+rest)
}

// TestPostgresFramer checks the Framer on a session with SCRAM
// authentication, simple and extended queries, a COPY FROM STDIN and an
// error.
func TestPostgresFramer(t *testing.T) {
	ready := msg('Z', "I")
	err := retrytest.CheckFramer(Postgres,
		retrytest.Exchange{Message: untyped(codeSSL, ""), Reply: []byte("N")},
		retrytest.Exchange{Message: untyped(196608, "user\x00app\x00database\x00bank\x00\x00"), Reply: auth(10, "SCRAM-SHA-256\x00\x00")},
		retrytest.Exchange{Message: msg('p', "SCRAM-SHA-256\x00client-first-message-bytes"), Reply: auth(11, "server-first-message")},
		retrytest.Exchange{Message: msg('p', "client-final-message-bytes"), Reply: cat(auth(12, "server-final"), auth(0, ""),
			msg('S', "server_version\x0017\x00"), msg('K', "12345678"), ready)},
		retrytest.Exchange{Message: msg('Q', "begin\x00"), Reply: cat(msg('C', "BEGIN\x00"), msg('Z', "T"))},
		retrytest.Exchange{Message: msg('P', "\x00insert into t values ($1)\x00\x00\x00")},
		retrytest.Exchange{Message: msg('B', "\x00\x00\x00\x00\x00\x01\x00\x00\x00\x011\x00\x00")},
		retrytest.Exchange{Message: msg('E', "\x00\x00\x00\x00\x00")},
		retrytest.Exchange{Message: msg('S', ""), Reply: cat(msg('1', ""), msg('2', ""), msg('C', "INSERT 0 1\x00"), msg('Z', "T"))},
		retrytest.Exchange{Message: msg('Q', "COPY t FROM STDIN\x00"), Reply: msg('G', "\x00\x00\x00")},
		retrytest.Exchange{Message: msg('d', "2\n3\n")},
		retrytest.Exchange{Message: msg('c', ""), Reply: cat(msg('C', "COPY 2\x00"), msg('Z', "T"))},
		retrytest.Exchange{Message: msg('Q', "select nothing\x00"), Reply: cat(msg('E', "SERROR\x00C42703\x00Mcolumn does not exist\x00\x00"), msg('Z', "E"))},
		retrytest.Exchange{Message: msg('Q', "COMMIT\x00"), Reply: cat(msg('C', "ROLLBACK\x00"), ready)},
		retrytest.Exchange{Message: msg('X', "")},
	)
	if err != nil {
		t.Fatal(err)
	}
	err = retrytest.CheckFramer(Postgres,
		retrytest.Exchange{Message: untyped(codeCancel, "\x00\x00\x30\x39secretkey"), Reply: []byte{}})
	if err != nil {
		t.Fatal(err)
	}
}
