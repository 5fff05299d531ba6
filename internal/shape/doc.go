// Package shape checks the fixed shapes of the ids and names mosaic
// validates (conversation ids and seat names, history ids, hex digests,
// UUIDs, revision file names) with byte loops.
//
// These were package-level regular expressions. Go compiles a bounded
// repetition such as [A-Za-z0-9._-]{0,63} into one instruction run per
// repetition, so the patterns cost every mosaicctl process about 1 ms of
// package initialisation and 300 KB before main (GODEBUG=inittrace=1:
// history 0.58 ms and 118 KB, conversations 0.31 ms and 87 KB, claims,
// queue, proofs), and a socket-activated controller pays that before it
// can answer its first hello. Compiling them lazily (sync.OnceValue)
// would only move the cost onto the first hello, which validates the
// conversation's names. A loop per shape costs nothing at start-up and
// less per match; shape_test.go holds the original expressions and checks
// each function against them.
package shape
