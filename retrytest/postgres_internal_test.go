package retrytest

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"testing"
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

// TestPostgresCheckFramer checks the Framer on a session with SCRAM
// authentication, simple and extended queries, a COPY FROM STDIN and an
// error.
func TestPostgresCheckFramer(t *testing.T) {
	ready := msg('Z', "I")
	err := CheckFramer(Postgres,
		Exchange{Message: untyped(pgCodeSSL, ""), Reply: []byte("N")},
		Exchange{Message: untyped(196608, "user\x00app\x00database\x00bank\x00\x00"), Reply: auth(10, "SCRAM-SHA-256\x00\x00")},
		Exchange{Message: msg('p', "SCRAM-SHA-256\x00client-first-message-bytes"), Reply: auth(11, "server-first-message")},
		Exchange{Message: msg('p', "client-final-message-bytes"), Reply: cat(auth(12, "server-final"), auth(0, ""),
			msg('S', "server_version\x0017\x00"), msg('K', "12345678"), ready)},
		Exchange{Message: msg('Q', "begin\x00"), Reply: cat(msg('C', "BEGIN\x00"), msg('Z', "T"))},
		Exchange{Message: msg('P', "\x00insert into t values ($1)\x00\x00\x00")},
		Exchange{Message: msg('B', "\x00\x00\x00\x00\x00\x01\x00\x00\x00\x011\x00\x00")},
		Exchange{Message: msg('E', "\x00\x00\x00\x00\x00")},
		Exchange{Message: msg('S', ""), Reply: cat(msg('1', ""), msg('2', ""), msg('C', "INSERT 0 1\x00"), msg('Z', "T"))},
		Exchange{Message: msg('Q', "COPY t FROM STDIN\x00"), Reply: msg('G', "\x00\x00\x00")},
		Exchange{Message: msg('d', "2\n3\n")},
		Exchange{Message: msg('c', ""), Reply: cat(msg('C', "COPY 2\x00"), msg('Z', "T"))},
		Exchange{Message: msg('Q', "select nothing\x00"), Reply: cat(msg('E', "SERROR\x00C42703\x00Mcolumn does not exist\x00\x00"), msg('Z', "E"))},
		Exchange{Message: msg('Q', "COMMIT\x00"), Reply: cat(msg('C', "ROLLBACK\x00"), ready)},
		Exchange{Message: msg('X', "")},
	)
	if err != nil {
		t.Fatal(err)
	}
	err = CheckFramer(Postgres,
		Exchange{Message: untyped(pgCodeCancel, "\x00\x00\x30\x39secretkey"), Reply: []byte{}})
	if err != nil {
		t.Fatal(err)
	}
}

func TestPgQueryName(t *testing.T) {
	for q, want := range map[string]string{
		"begin\x00": "BEGIN", " BEGIN ISOLATION LEVEL SERIALIZABLE\x00": "BEGIN", "start transaction read only\x00": "START",
		"commit;\x00": "COMMIT", "SELECT 1\x00": "SELECT", "\x00": "",
	} {
		if got := pgQueryName([]byte(q)); got != want {
			t.Errorf("pgQueryName(%q) = %q; want %q", q, got, want)
		}
	}
}

// FuzzPostgres feeds arbitrary bytes to both sides of the Postgres Framer:
// it must return an error or messages and replies that are prefixes of
// what it read, never panic or allocate beyond what arrived.
func FuzzPostgres(f *testing.F) {
	f.Add(cat(untyped(pgCodeSSL, ""), untyped(196608, "user\x00app\x00\x00"), msg('Q', "begin\x00")),
		cat([]byte("N"), auth(0, ""), msg('Z', "I"), msg('C', "BEGIN\x00"), msg('Z', "T")))
	f.Add(untyped(pgCodeCancel, "12345678"), []byte{})
	f.Add(cat(untyped(196608, "\x00"), msg('P', "\x00x\x00\x00\x00"), msg('S', "")),
		cat(auth(10, "SCRAM-SHA-256\x00\x00"), msg('1', ""), msg('Z', "I")))
	f.Add([]byte{0xff, 0xff, 0xff, 0xff}, []byte("Q\xff\xff\xff\xff"))
	f.Fuzz(func(t *testing.T, client, server []byte) {
		fr := Postgres()
		cr := bufio.NewReader(bytes.NewReader(client))
		sr := bufio.NewReader(bytes.NewReader(server))
		var msgs, replies []byte
		for range 64 {
			m, name, err := fr.Next(cr)
			if err != nil {
				break
			}
			msgs = append(msgs, m...)
			if !bytes.HasPrefix(client, msgs) {
				t.Fatalf("messages %q are not a prefix of %q", msgs, client)
			}
			r, err := fr.Reply(sr, name)
			if err != nil {
				break
			}
			replies = append(replies, r...)
			if !bytes.HasPrefix(server, replies) {
				t.Fatalf("replies %q are not a prefix of %q", replies, server)
			}
		}
	})
}
