// Package conversations stores the conversations a user has registered with
// `mosaicctl conv add`: one TOML file per conversation under
// $XDG_CONFIG_HOME/mosaic/conversations/<id>.toml.
//
// A conversation is a Pi session file at
// <project>/.pi/state/<seat>/sessions/<name>.jsonl. Its id is opaque, stable
// for (project root, seat, session file name) and safe as a systemd instance
// name, so `mosaic-conv@<id>.socket` needs no escaping.
//
// Choices where the issue is silent:
//   - The id is "pi-" plus the first 20 hex digits of SHA-256 over the
//     project root, seat and file name, NUL-separated (80 bits: collisions
//     are not a practical concern for one user's conversations).
//   - Every component of the project and session paths is checked with
//     lstat: a symlink anywhere is refused and the message names the real
//     path to use instead. The session file may be missing (Pi writes it
//     lazily); if present it must be a regular file.
//   - Adding a conversation that exists with the same settings is a no-op;
//     with other settings it is refused unless replaced explicitly.
//   - The workspace defaults to "default".
package conversations
