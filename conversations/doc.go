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
//
// # Limits
//
// [limits] holds MemoryMax=, TasksMax= and CPUQuota= of the engine's
// scope as typed values (MemoryMax, TasksMax, CPUQuota), parsed with
// systemd's own syntax at `conv add` and at every Load, so a file edited
// by hand is refused at load naming the key, the value and an example,
// never launched with a silently different limit. The file stores the
// normalized string ("1536M" for "1.5G", "12.5%").
//
// The accepted syntax is a documented subset of systemd 252's parsers
// (parse_size with base 1024 for MemoryMax=, safe_atou64 for TasksMax=,
// parse_permyriad for percentages, parse_permyriad_unbounded for
// CPUQuota=), checked against the sandbox's real systemd by reading every
// accepted value back over D-Bus (controller's
// TestLimitsReadBackFromSystemd, table in internal/limitcases):
//
//   - MemoryMax: digits, an optional fraction, an optional upper-case
//     suffix K M G T P E (base 1024) or B; the fraction is computed in a
//     double exactly as systemd does (1.1M is 1153433 bytes). N%, N.N% or
//     N.NN% of physical memory, more than 0 and at most 100%. infinity.
//     0 is refused (systemd refuses it for MemoryMax=).
//   - TasksMax: a decimal count of at least 1, N% of the system's task
//     limit, or infinity. Files written before limits were typed hold an
//     integer; 0 there meant unset and still does.
//   - CPUQuota: N%, N.N% or N.NN% of one CPU, more than 0 and at most
//     21474836.47% (parse_permyriad_unbounded's int).
//
// Refused although systemd reads them, because nobody typing them means
// what systemd does: leading whitespace, a sum of sizes ("1G 512M"), a
// dot without digits ("10.M"), a leading "+", 0x/0o/0b prefixes, leading
// zeros in counts and percentages (systemd reads TasksMax=010 as octal
// 8), and the ‰ and ‱ forms.
//
// Percentages are sent as systemd-run sends them: MemoryMaxScale and
// TasksMaxScale (Permyriad.Scale, UINT32_MAX = 100%), so systemd resolves
// them against its own view of physical memory and of its task limit;
// infinity as UINT64_MAX; CPUQuota as CPUQuotaPerSecUSec
// (CPUQuota.PerSecUSec). The controller re-reads the file at each launch,
// so a replaced limit applies at the next launch.
package conversations
