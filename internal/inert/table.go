package inert

// Class is why a character is in Table. The zero Class, Verbatim, is
// every character that is not.
type Class uint8

const (
	// Verbatim characters are shown as themselves.
	Verbatim Class = iota
	// C0 controls start terminal escapes (ESC) and break lines (LF, CR).
	C0
	// DEL is the one control above the C0 block in ASCII.
	DEL
	// C1 controls: CSI (U+009B) and NEL (U+0085) act like ESC [ and a
	// newline on terminals that read them.
	C1
	// Bidi controls reorder the text around them ("file<RLO>txt.exe").
	Bidi
	// Separator is U+2028 and U+2029, line breaks to some readers.
	Separator
	// Invisible characters take no room, so they hide text between the
	// letters an operator reads.
	Invisible
	// Tag characters are invisible and spell out ASCII of their own.
	Tag
)

// Range is one row of Table: every character from Lo to Hi (inclusive)
// is of Class, Name says which they are.
type Range struct {
	Lo, Hi rune
	Class  Class
	Name   string
}

// Table is the one table of what engine text may not carry verbatim,
// sorted by Lo, rows disjoint (Of relies on both). LF is in the C0 row:
// a reader that lays out lines splits at it before escaping the rest.
// Invalid UTF-8 is not a character and is each reader's to show. ZWJ and
// ZWNJ are not here: emoji sequences and joining scripts need them.
var Table = []Range{
	{0x0000, 0x001F, C0, "C0 control"},
	{0x007F, 0x007F, DEL, "DEL"},
	{0x0080, 0x009F, C1, "C1 control"},
	{0x061C, 0x061C, Bidi, "bidi control (ALM)"},
	{0x200B, 0x200B, Invisible, "invisible (ZWSP)"},
	{0x200E, 0x200F, Bidi, "bidi control (LRM, RLM)"},
	{0x2028, 0x2029, Separator, "line/paragraph separator"},
	{0x202A, 0x202E, Bidi, "bidi control (embeddings, overrides)"},
	{0x2060, 0x2064, Invisible, "invisible (word joiner, invisible operators)"},
	{0x2066, 0x2069, Bidi, "bidi control (isolates)"},
	{0xFEFF, 0xFEFF, Invisible, "invisible (BOM, ZWNBSP)"},
	{0xE0000, 0xE007F, Tag, "tag character"},
}
