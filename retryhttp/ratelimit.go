package retryhttp

import "unicode/utf8"

// rateLimit is what a RateLimit field (IETF
// draft-ietf-httpapi-ratelimit-headers-11) says, in the terms retryhttp
// uses: its service-limit items are Strings (the policy's name) with an
// Integer r (remaining quota units, required), an Integer t (seconds until
// the quota resets) and a Byte Sequence pk (the partition key).
type rateLimit struct {
	items int // valid service-limit items: a String with an Integer r >= 0

	// The item with r = 0 and a t, the one with the longest t if several.
	spent   bool
	spentT  string // t's digits
	spentN  int64  // t's value
	spentPK string // its pk, as sent (base64), or ""

	onlyT    string // t's digits of the last valid item (the only one, when items is 1)
	onlyHasT bool
	pk       string // the first pk of a valid item, or ""
}

// parseRateLimit parses the lines of a RateLimit field as one RFC 9651
// List and reads its items. Any line that is not valid Structured Fields
// syntax makes the whole field malformed (false), and so does a line that
// is empty, as RFC 9651 combines lines with commas. Members that are not
// service-limit items (an Inner List, another type, an r that is missing,
// negative or not an Integer, a t that is negative or not an Integer, a pk
// that is not a Byte Sequence) are skipped. It allocates nothing.
func parseRateLimit(lines []string) (rateLimit, bool) {
	var rl rateLimit
	for _, line := range lines {
		p := sfParser{s: line}
		p.skipSP()
		if p.i == len(p.s) {
			return rateLimit{}, false
		}
		for {
			var m member
			if !p.member(&m) {
				return rateLimit{}, false
			}
			rl.add(&m)
			p.skipOWS()
			if p.i == len(p.s) {
				break
			}
			if p.s[p.i] != ',' {
				return rateLimit{}, false
			}
			p.i++
			p.skipOWS()
			if p.i == len(p.s) {
				return rateLimit{}, false // a trailing comma
			}
		}
	}
	return rl, true
}

// add takes one list member into rl if it is a service-limit item.
func (rl *rateLimit) add(m *member) {
	if !m.isString || !m.hasR || m.badR || m.badT || m.badPK {
		return
	}
	rl.items++
	rl.onlyT, rl.onlyHasT = m.t, m.hasT
	if rl.pk == "" {
		rl.pk = m.pk
	}
	if m.r == 0 && m.hasT && (!rl.spent || m.tn > rl.spentN) {
		rl.spent, rl.spentT, rl.spentN, rl.spentPK = true, m.t, m.tn, m.pk
	}
}

// member is what parseRateLimit keeps of one list member.
type member struct {
	isString bool // an Item whose bare item is a String
	hasR     bool
	r        int64
	hasT     bool
	t        string // digits
	tn       int64
	pk       string // a Byte Sequence's content, as sent

	badR, badT, badPK bool // the last r, t or pk of the wrong type or sign
}

// sfParser reads RFC 9651 Structured Fields syntax from s, starting at i.
type sfParser struct {
	s string
	i int
}

func (p *sfParser) skipSP() {
	for p.i < len(p.s) && p.s[p.i] == ' ' {
		p.i++
	}
}

func (p *sfParser) skipOWS() {
	for p.i < len(p.s) && (p.s[p.i] == ' ' || p.s[p.i] == '\t') {
		p.i++
	}
}

// member parses an Item or an Inner List, with its parameters.
func (p *sfParser) member(m *member) bool {
	if p.i < len(p.s) && p.s[p.i] == '(' {
		p.i++
		for {
			p.skipSP()
			if p.i == len(p.s) {
				return false
			}
			if p.s[p.i] == ')' {
				p.i++
				break
			}
			if _, ok := p.bareItem(); !ok || !p.params(nil) {
				return false
			}
			if p.i < len(p.s) && p.s[p.i] != ' ' && p.s[p.i] != ')' {
				return false
			}
		}
		return p.params(nil)
	}
	kind, ok := p.bareItem()
	if !ok {
		return false
	}
	m.isString = kind == sfString
	return p.params(m)
}

// params parses *( ";" *SP key [ "=" bare-item ] ), recording r, t and pk
// in m when m is not nil (a later duplicate key overrides, as RFC 9651
// says).
func (p *sfParser) params(m *member) bool {
	for p.i < len(p.s) && p.s[p.i] == ';' {
		p.i++
		p.skipSP()
		key, ok := p.key()
		if !ok {
			return false
		}
		kind, start := sfBoolean, p.i
		if p.i < len(p.s) && p.s[p.i] == '=' {
			p.i++
			start = p.i
			if kind, ok = p.bareItem(); !ok {
				return false
			}
		}
		if m == nil {
			continue
		}
		v := p.s[start:p.i]
		switch key {
		case "r":
			m.hasR, m.badR = kind == sfInteger && v[0] != '-', kind != sfInteger || v[0] == '-'
			if m.hasR {
				m.r = atoi15(v)
			}
		case "t":
			m.hasT, m.badT = kind == sfInteger && v[0] != '-', kind != sfInteger || v[0] == '-'
			if m.hasT {
				m.t, m.tn = v, atoi15(v)
			}
		case "pk":
			m.pk, m.badPK = "", kind != sfBinary
			if kind == sfBinary {
				m.pk = v[1 : len(v)-1]
			}
		}
	}
	return true
}

// atoi15 is the value of at most 15 ASCII digits.
func atoi15(digits string) int64 {
	var n int64
	for _, c := range []byte(digits) {
		n = n*10 + int64(c-'0')
	}
	return n
}

// key parses an RFC 9651 key.
func (p *sfParser) key() (string, bool) {
	start := p.i
	if p.i == len(p.s) || !(isLCAlpha(p.s[p.i]) || p.s[p.i] == '*') {
		return "", false
	}
	for p.i++; p.i < len(p.s); p.i++ {
		c := p.s[p.i]
		if !(isLCAlpha(c) || isDigit(c) || c == '_' || c == '-' || c == '.' || c == '*') {
			break
		}
	}
	return p.s[start:p.i], true
}

// Kinds of bare items.
const (
	sfInteger = iota + 1
	sfDecimal
	sfString
	sfToken
	sfBinary
	sfBoolean
	sfDate
	sfDisplayString
)

// bareItem parses one bare item and returns its kind.
func (p *sfParser) bareItem() (int, bool) {
	if p.i == len(p.s) {
		return 0, false
	}
	switch c := p.s[p.i]; {
	case c == '-' || isDigit(c):
		return p.number()
	case c == '"':
		p.i++
		return sfString, p.quoted()
	case c == '*' || isAlpha(c):
		for p.i++; p.i < len(p.s) && (isTchar(p.s[p.i]) || p.s[p.i] == ':' || p.s[p.i] == '/'); p.i++ {
		}
		return sfToken, true
	case c == ':':
		for p.i++; p.i < len(p.s) && p.s[p.i] != ':'; p.i++ {
			if c := p.s[p.i]; !(isAlpha(c) || isDigit(c) || c == '+' || c == '/' || c == '=') {
				return 0, false
			}
		}
		if p.i == len(p.s) {
			return 0, false
		}
		p.i++
		return sfBinary, true
	case c == '?':
		if p.i+1 < len(p.s) && (p.s[p.i+1] == '0' || p.s[p.i+1] == '1') {
			p.i += 2
			return sfBoolean, true
		}
	case c == '@':
		p.i++
		if k, ok := p.number(); ok && k == sfInteger {
			return sfDate, true
		}
	case c == '%':
		if p.i+1 < len(p.s) && p.s[p.i+1] == '"' {
			p.i += 2
			return sfDisplayString, p.display()
		}
	}
	return 0, false
}

// number parses an Integer (at most 15 digits) or a Decimal (at most 12
// integer and 1 to 3 fraction digits).
func (p *sfParser) number() (int, bool) {
	if p.i < len(p.s) && p.s[p.i] == '-' {
		p.i++
	}
	start := p.i
	for p.i < len(p.s) && isDigit(p.s[p.i]) {
		p.i++
	}
	n := p.i - start
	if n == 0 || n > 15 {
		return 0, false
	}
	if p.i == len(p.s) || p.s[p.i] != '.' {
		return sfInteger, true
	}
	if n > 12 {
		return 0, false
	}
	p.i++
	start = p.i
	for p.i < len(p.s) && isDigit(p.s[p.i]) {
		p.i++
	}
	if f := p.i - start; f == 0 || f > 3 {
		return 0, false
	}
	return sfDecimal, true
}

// quoted parses the rest of a String after its opening quote.
func (p *sfParser) quoted() bool {
	for ; p.i < len(p.s); p.i++ {
		switch c := p.s[p.i]; {
		case c == '"':
			p.i++
			return true
		case c == '\\':
			p.i++
			if p.i == len(p.s) || p.s[p.i] != '"' && p.s[p.i] != '\\' {
				return false
			}
		case c < 0x20 || c > 0x7e:
			return false
		}
	}
	return false
}

// display parses the rest of a Display String after %", checking that its
// percent-encoded bytes are UTF-8.
func (p *sfParser) display() bool {
	var pend [utf8.UTFMax]byte
	np := 0
	for ; p.i < len(p.s); p.i++ {
		c := p.s[p.i]
		switch {
		case c == '"':
			p.i++
			return np == 0
		case c < 0x20 || c > 0x7e:
			return false
		case c != '%':
			if np != 0 {
				return false
			}
			continue
		}
		if p.i+2 >= len(p.s) || !isLCHex(p.s[p.i+1]) || !isLCHex(p.s[p.i+2]) {
			return false
		}
		pend[np] = unhex(p.s[p.i+1])<<4 | unhex(p.s[p.i+2])
		np++
		p.i += 2
		if utf8.FullRune(pend[:np]) {
			if r, size := utf8.DecodeRune(pend[:np]); r == utf8.RuneError && size <= 1 || size != np {
				return false
			}
			np = 0
		}
	}
	return false
}

func isDigit(c byte) bool   { return c >= '0' && c <= '9' }
func isLCAlpha(c byte) bool { return c >= 'a' && c <= 'z' }
func isAlpha(c byte) bool   { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }
func isLCHex(c byte) bool   { return isDigit(c) || c >= 'a' && c <= 'f' }

func unhex(c byte) byte {
	if isDigit(c) {
		return c - '0'
	}
	return c - 'a' + 10
}

// isTchar reports whether c is an RFC 9110 tchar.
func isTchar(c byte) bool {
	switch {
	case isAlpha(c), isDigit(c):
		return true
	}
	switch c {
	case '!', '#', '$', '%', '&', '\'', '*', '+', '-', '.', '^', '_', '`', '|', '~':
		return true
	}
	return false
}
