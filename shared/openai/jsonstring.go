package openai

import (
	"errors"
	"unicode/utf16"
	"unicode/utf8"
)

// ErrBadString is returned for a JSON string that is unterminated or holds
// an invalid escape or a raw control character.
var ErrBadString = errors.New("openai: malformed JSON string")

// AppendUnquote appends the text of the quoted JSON string q to dst.
func AppendUnquote(dst, q []byte) ([]byte, error) {
	if len(q) < 2 || q[0] != '"' || q[len(q)-1] != '"' {
		return dst, ErrBadString
	}
	s := q[1 : len(q)-1]
	for i := 0; i < len(s); i++ {
		// Copy the run up to the next escape in one go: most tokens have none.
		run := i
		for run < len(s) && s[run] != '\\' && s[run] >= 0x20 {
			run++
		}
		dst = append(dst, s[i:run]...)
		if i = run; i == len(s) {
			break
		}
		if s[i] < 0x20 {
			return dst, ErrBadString
		}
		i++
		if i >= len(s) {
			return dst, ErrBadString
		}
		switch s[i] {
		case '"', '\\', '/':
			dst = append(dst, s[i])
		case 'b':
			dst = append(dst, '\b')
		case 'f':
			dst = append(dst, '\f')
		case 'n':
			dst = append(dst, '\n')
		case 'r':
			dst = append(dst, '\r')
		case 't':
			dst = append(dst, '\t')
		case 'u':
			r, n := hex4(s[i+1:])
			if n < 0 {
				return dst, ErrBadString
			}
			i += n
			if utf16.IsSurrogate(r) {
				if r2, n2 := lowSurrogate(s[i+1:]); n2 > 0 {
					r = utf16.DecodeRune(r, r2)
					i += n2
				} else {
					r = utf8.RuneError
				}
			}
			dst = utf8.AppendRune(dst, r)
		default:
			return dst, ErrBadString
		}
	}
	return dst, nil
}

func lowSurrogate(s []byte) (rune, int) {
	if len(s) < 6 || s[0] != '\\' || s[1] != 'u' {
		return 0, -1
	}
	r, n := hex4(s[2:])
	if n < 0 || r < 0xDC00 || r > 0xDFFF {
		return 0, -1
	}
	return r, n + 2
}

func hex4(s []byte) (rune, int) {
	if len(s) < 4 {
		return 0, -1
	}
	var r rune
	for _, c := range s[:4] {
		r <<= 4
		switch {
		case '0' <= c && c <= '9':
			r |= rune(c - '0')
		case 'a' <= c && c <= 'f':
			r |= rune(c - 'a' + 10)
		case 'A' <= c && c <= 'F':
			r |= rune(c - 'A' + 10)
		default:
			return 0, -1
		}
	}
	return r, 4
}

const hexDigits = "0123456789abcdef"

// safe marks the bytes AppendQuote copies as they are: printable ASCII but
// the quote and the backslash.
var safe = func() (t [256]bool) {
	for c := 0x20; c < utf8.RuneSelf; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

// AppendQuote appends text to dst as a JSON string. Invalid UTF-8 becomes
// U+FFFD, as encoding/json does, so the client always gets valid JSON.
func AppendQuote(dst, text []byte) []byte {
	dst = append(dst, '"')
	for i := 0; i < len(text); {
		// Copy the run of bytes that need no escaping in one go.
		run := i
		for run < len(text) && safe[text[run]] {
			run++
		}
		dst = append(dst, text[i:run]...)
		if i = run; i == len(text) {
			break
		}
		c := text[i]
		if c < utf8.RuneSelf {
			switch {
			case c == '"' || c == '\\':
				dst = append(dst, '\\', c)
			case c == '\n':
				dst = append(dst, '\\', 'n')
			case c == '\r':
				dst = append(dst, '\\', 'r')
			case c == '\t':
				dst = append(dst, '\\', 't')
			case c < 0x20:
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
			default:
				dst = append(dst, c)
			}
			i++
			continue
		}
		r, size := utf8.DecodeRune(text[i:])
		if r == utf8.RuneError && size == 1 {
			dst = append(dst, "\ufffd"...)
		} else {
			dst = append(dst, text[i:i+size]...)
		}
		i += size
	}
	return append(dst, '"')
}
