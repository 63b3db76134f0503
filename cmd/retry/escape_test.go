package main

import (
	"bytes"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestEscapeLine(t *testing.T) {
	for in, want := range map[string]string{
		"503 Service Unavailable": "503 Service Unavailable",
		"a\x1b[31mb":              `a\x1b[31mb`,
		"one\ntwo\rthree\tfour":   `one\ntwo\rthree` + "\tfour",
		"bell\x07 del\x7f":        `bell\x07 del\x7f`,
		"c1 \u009b csi":           `c1 \u009b csi`,
		"bidi \u202eevil\u2066":   `bidi \u202eevil\u2066`,
		"bad \xff utf8":           `bad \xff utf8`,
		"héllo wörld ✓":           "héllo wörld ✓",
	} {
		if got := escapeLine(in); got != want {
			t.Errorf("escapeLine(%q) = %q, want %q", in, got, want)
		}
	}
}

// escapeBody writes in through an escapingWriter in pieces of the given
// sizes (repeating the last) and returns what came out.
func escapeBody(in []byte, size int) string {
	var out bytes.Buffer
	w := &escapingWriter{w: &out}
	for len(in) > 0 {
		n := min(size, len(in))
		w.Write(in[:n])
		in = in[n:]
	}
	w.Close()
	return out.String()
}

func TestEscapingWriter(t *testing.T) {
	in := "line 1\r\nline\t2\n\x1b]0;title\x07 ö ✓ \u009b \u202e\xff\r end\r"
	want := "line 1\r\nline\t2\n" + `\x1b]0;title\x07 ö ✓ \u009b \u202e\xff\r end\r`
	for size := 1; size <= len(in); size++ {
		if got := escapeBody([]byte(in), size); got != want {
			t.Fatalf("writes of %d bytes: %q, want %q", size, got, want)
		}
	}
}

// FuzzEscapingWriter: whatever the body and however it is split, the
// output is the same, holds no control character but newline, tab and the
// CR of a CRLF, and is valid UTF-8.
func FuzzEscapingWriter(f *testing.F) {
	for _, s := range []string{"", "ok\n", "\x1b[2J", "a\r\nb\rc", "ö✓\u009b\u202e", "\xe2\x9c", "\xff\xfe"} {
		f.Add([]byte(s), uint8(1))
	}
	f.Fuzz(func(t *testing.T, in []byte, size uint8) {
		whole := escapeBody(in, len(in)+1)
		if got := escapeBody(in, int(size%16)+1); got != whole {
			t.Fatalf("split writes of %d: %q, whole: %q", size%16+1, got, whole)
		}
		if !utf8.ValidString(whole) {
			t.Fatalf("invalid UTF-8 out: %q", whole)
		}
		for i, r := range whole {
			if r == '\r' && strings.HasPrefix(whole[i:], "\r\n") || r == '\n' || r == '\t' {
				continue
			}
			if mustEscape(r) {
				t.Fatalf("%q passed through in %q", r, whole)
			}
		}
		if line := escapeLine(string(in)); strings.ContainsAny(line, "\n\r") || !utf8.ValidString(line) {
			t.Fatalf("escapeLine(%q) = %q", in, line)
		}
	})
}
