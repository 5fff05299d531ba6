// Package fakeanthropic is a scripted Anthropic Messages API on loopback
// for driving the real Claude Code CLI in tests without any network,
// login or money: the CLI is started with ANTHROPIC_BASE_URL pointing at
// Server.URL and a dummy ANTHROPIC_API_KEY.
//
// It answers POST /v1/messages (the CLI adds ?beta=true) with a streamed
// (SSE) reply scripted on the last block of the last role-user message,
// the way the probe's fake_anthropic.py did (DIGEST §11):
//
//	BASH{cmd}      a Bash tool_use running cmd (preceded by "I will run it.")
//	BASHBG{cmd}    the same, with run_in_background set
//	HANG           a message that starts, streams one delta, then stays
//	               silent until the client goes away (interrupt tests)
//	SLOW           SlowChunks text deltas, SlowDelay apart (restart and
//	               interrupt tests that need a turn streaming for seconds)
//	FULLCONTEXT    the echo below, reporting FullContextTokens input tokens
//	               (the CLI compacts before its next request)
//	a tool_result  "TOOL_DONE: " + the result's text
//	other text     "Hello from fake. You said: " + the text
//
// Every request is recorded (Requests) before it is answered, whatever
// its method or path, so a test can assert that the fake was the only
// thing the CLI talked to and that it asked for nothing but messages:
// anything other than POST /v1/messages is answered 404 and recorded as
// Unexpected. The fake listens on 127.0.0.1 only.
//
// Alternatives weighed: replaying the probe's recorded SSE byte for byte
// (rigid: a test cannot choose its prompt), and the probe's Python fake
// (a second language and interpreter in CI). Scripting on markers in the
// prompt keeps each test's expectations in the test.
package fakeanthropic
