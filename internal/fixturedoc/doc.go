// Package fixturedoc holds no code, only a test: every fixture tag that a
// comment, a string or a test name of the module, or another Markdown
// document, uses (W9, K10, S7, ..., and the plan's question numbers such
// as Q20) must be defined in docs/fixtures.md, which says what each one
// means and which tests hold it; and every test that document names must
// exist.
//
// The tags come from the brief and seeds the project was built from, which
// are not in the repository; without the document a reader meets "(K10)"
// and cannot follow it. A tag is a capital letter of the brief's fixture
// tables (W, N, S, H, K, P, E, L) or Q, then one or two digits, standing
// as a word. docs/fixtures.md defines a tag by a table row whose first
// cell is that tag.
//
// Alternatives weighed: a go:generate step that writes the document from
// the tags cannot know what a fixture means; a list of allowed tags in Go
// would be a second copy of the document. So the document is the list, and
// this test only checks that the code points at nothing it lacks.
package fixturedoc
