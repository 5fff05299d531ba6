package inert

import "unicode/utf8"

// ascii is Of for the ASCII range, built from Table so the two cannot
// disagree.
var ascii = func() (t [utf8.RuneSelf]Class) {
	for _, e := range Table {
		for r := e.Lo; r <= e.Hi && r < utf8.RuneSelf; r++ {
			t[r] = e.Class
		}
	}
	return t
}()

// Of returns the Class of r: Verbatim unless r is in Table.
func Of(r rune) Class {
	if uint32(r) < utf8.RuneSelf {
		return ascii[r]
	}
	for _, e := range Table {
		if r < e.Lo {
			break
		}
		if r <= e.Hi {
			return e.Class
		}
	}
	return Verbatim
}

// Escaped reports whether r is in Table, so may not be carried verbatim.
func Escaped(r rune) bool { return Of(r) != Verbatim }
