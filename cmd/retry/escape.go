package main

import (
	"io"
	"strconv"
	"unicode/utf8"
)

// Text from the network (status lines, headers, error messages that quote
// them, bodies shown on a terminal) is printed with its control characters
// escaped, so that a server cannot move the cursor, retitle the window or
// hide text on the user's terminal.

// mustEscape reports whether r is escaped: C0 controls, DEL, C1 controls,
// and the bidirectional overrides and isolates that reorder what is shown.
func mustEscape(r rune) bool {
	return r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) ||
		(r >= 0x202a && r <= 0x202e) || (r >= 0x2066 && r <= 0x2069)
}

// appendEscaped appends src to dst with the characters mustEscape names
// written as Go escapes (\n, \r, \x1b, \u202e) and bytes that are not UTF-8
// as \xNN. keepLines keeps newline and tab as they are (for bodies).
func appendEscaped(dst, src []byte, keepLines bool) []byte {
	for len(src) > 0 {
		r, n := utf8.DecodeRune(src)
		switch {
		case r == utf8.RuneError && n <= 1:
			dst = append(dst, `\x`...)
			dst = appendHex(dst, uint64(src[0]), 2)
		case r == '\t' || keepLines && r == '\n':
			dst = append(dst, byte(r))
		case r == '\n':
			dst = append(dst, `\n`...)
		case r == '\r':
			dst = append(dst, `\r`...)
		case r < 0x80 && mustEscape(r):
			dst = append(dst, `\x`...)
			dst = appendHex(dst, uint64(r), 2)
		case mustEscape(r):
			dst = append(dst, `\u`...)
			dst = appendHex(dst, uint64(r), 4)
		default:
			dst = append(dst, src[:n]...)
		}
		src = src[n:]
	}
	return dst
}

func appendHex(dst []byte, v uint64, width int) []byte {
	s := strconv.FormatUint(v, 16)
	for i := len(s); i < width; i++ {
		dst = append(dst, '0')
	}
	return append(dst, s...)
}

// escapeLine returns s with every control character escaped, newlines
// included: one printed line stays one line.
func escapeLine(s string) string {
	for _, r := range s {
		if mustEscape(r) || r == utf8.RuneError {
			return string(appendEscaped(nil, []byte(s), false))
		}
	}
	return s
}

// escapingWriter writes a body to a terminal with control characters
// escaped except newline and tab (and CR directly before LF). A UTF-8
// sequence or CR split across writes is held until the next write or Close.
type escapingWriter struct {
	w     io.Writer
	carry []byte // an incomplete UTF-8 sequence or a trailing CR
	buf   []byte
}

func (e *escapingWriter) Write(p []byte) (int, error) {
	data := append(e.carry, p...)
	e.carry = nil
	// Hold back an incomplete UTF-8 sequence or a CR at the end.
	cut := len(data)
	if cut > 0 && data[cut-1] == '\r' {
		cut--
	} else {
		for i := max(cut-utf8.UTFMax+1, 0); i < cut; i++ {
			if utf8.RuneStart(data[i]) && data[i] >= 0xc0 && !utf8.FullRune(data[i:]) {
				cut = i
				break
			}
		}
	}
	e.carry = append(e.carry, data[cut:]...)
	e.buf = e.buf[:0]
	rest := data[:cut]
	for len(rest) > 0 {
		i := indexCRLF(rest)
		if i < 0 {
			e.buf = appendEscaped(e.buf, rest, true)
			break
		}
		e.buf = appendEscaped(e.buf, rest[:i], true)
		e.buf = append(e.buf, "\r\n"...)
		rest = rest[i+2:]
	}
	if _, err := e.w.Write(e.buf); err != nil {
		return 0, err
	}
	return len(p), nil
}

// Close writes what was held back, escaped.
func (e *escapingWriter) Close() error {
	if len(e.carry) == 0 {
		return nil
	}
	_, err := e.w.Write(appendEscaped(nil, e.carry, true))
	e.carry = nil
	return err
}

func indexCRLF(b []byte) int {
	for i := 0; i+1 < len(b); i++ {
		if b[i] == '\r' && b[i+1] == '\n' {
			return i
		}
	}
	return -1
}
