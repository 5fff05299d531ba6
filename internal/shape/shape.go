package shape

// Alnum reports whether b is an ASCII letter or digit.
func Alnum(b byte) bool {
	return 'a' <= b && b <= 'z' || 'A' <= b && b <= 'Z' || '0' <= b && b <= '9'
}

// LowerHex reports whether b is a lowercase hexadecimal digit.
func LowerHex(b byte) bool { return '0' <= b && b <= '9' || 'a' <= b && b <= 'f' }

// Digit reports whether b is an ASCII decimal digit.
func Digit(b byte) bool { return '0' <= b && b <= '9' }

// Lower reports whether b is an ASCII lowercase letter.
func Lower(b byte) bool { return 'a' <= b && b <= 'z' }

// Token reports whether s is min to max bytes long, its first byte
// accepted by first and every later one by rest (min ≥ 1).
func Token(s string, min, max int, first, rest func(byte) bool) bool {
	if len(s) < min || len(s) > max || len(s) == 0 || !first(s[0]) {
		return false
	}
	return All(s[1:], rest)
}

// All reports whether ok accepts every byte of s.
func All(s string, ok func(byte) bool) bool {
	for i := 0; i < len(s); i++ {
		if !ok(s[i]) {
			return false
		}
	}
	return true
}

// Hex reports whether s is exactly n lowercase hexadecimal digits.
func Hex(s string, n int) bool { return len(s) == n && All(s, LowerHex) }

// UUID reports whether s is a lowercase RFC 4122 text UUID:
// 8-4-4-4-12 lowercase hexadecimal digits.
func UUID(s string) bool {
	if len(s) != 36 {
		return false
	}
	for i := 0; i < len(s); i++ {
		switch i {
		case 8, 13, 18, 23:
			if s[i] != '-' {
				return false
			}
		default:
			if !LowerHex(s[i]) {
				return false
			}
		}
	}
	return true
}

// Revision reports whether name is a revision file name, r followed by
// ten decimal digits and .json, and returns the digits.
func Revision(name string) (string, bool) {
	const prefix, suffix, digits = "r", ".json", 10
	if len(name) != len(prefix)+digits+len(suffix) || name[:1] != prefix || name[1+digits:] != suffix {
		return "", false
	}
	d := name[1 : 1+digits]
	return d, All(d, Digit)
}
