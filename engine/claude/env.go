package claude

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/mosaic-agents/mosaic/internal/detour"
	"github.com/mosaic-agents/mosaic/protocol"
)

// Forced is set on every Claude process, --version included: no
// auto-update, no telemetry, no error reporting, no nonessential traffic
// (without them the CLI sends HEAD /api/hello and resolves other hosts,
// DIGEST §1), and the SDK entrypoint the recordings were made with.
var Forced = []string{
	"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1",
	"DISABLE_AUTOUPDATER=1",
	"DISABLE_TELEMETRY=1",
	"DISABLE_ERROR_REPORTING=1",
	"CLAUDE_CODE_ENTRYPOINT=sdk-ts",
	// The tool shell a confined engine's view holds (scopes.ToolShell):
	// each Bash command runs in a Landlock domain nested in the engine's
	// and cannot attach to it. The CLI takes it only where it is
	// executable, else its own choice of bash, as in an unconfined
	// engine, whose view has none.
	"CLAUDE_CODE_SHELL=" + toolShell,
}

// toolShell is scopes.ToolShell, which this package does not import.
const toolShell = "/dev/mosaic-bash"

// passed are taken from the controller's environment; nothing else is.
// Credentials, proxies, CLAUDE_* and ANTHROPIC_* of the controller never
// reach the engine.
var passed = []string{"PATH", "HOME", "USER", "LOGNAME", "LANG", "LC_ALL", "LC_CTYPE", "TZ"}

// EnvFileNames are the only names an env file may set.
var EnvFileNames = []string{"ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "ANTHROPIC_BASE_URL"}

// maxEnvFile bounds an env file.
const maxEnvFile = 64 << 10

// PlaceholderEnvFile is what a controller writes at a conversation's env
// file that is missing when another conversation's engine launches, so
// that it is there to bind read-only (an engine could otherwise write it,
// ANTHROPIC_BASE_URL included, and the conversation would launch with
// what it wrote). LoadEnvFile refuses it as it refused the missing file.
const PlaceholderEnvFile = "# mosaic made this file: it was missing, and an engine could have written it.\n" +
	"# Put this conversation's NAME=VALUE lines here (ANTHROPIC_API_KEY, ANTHROPIC_AUTH_TOKEN, ANTHROPIC_BASE_URL).\n"

// Dirs are the controller-owned directories of one conversation.
type Dirs struct {
	// Config becomes CLAUDE_CONFIG_DIR: settings, transcripts, session
	// state. Required.
	Config string
	// Tmp becomes CLAUDE_CODE_TMPDIR and TMPDIR, so nothing lands in a
	// shared /tmp. Required.
	Tmp string
	// Runtime becomes XDG_RUNTIME_DIR (the CLI's cc-socks socket); ""
	// passes none.
	Runtime string
}

// Environ builds the sealed environment: passed names from environ, the
// controller-owned directories, the env file's values, then Forced last
// (a later duplicate wins in most libcs; Forced names are never passed
// or allowed in an env file anyway).
func Environ(environ []string, d Dirs, file map[string]string) ([]string, error) {
	if !filepath.IsAbs(d.Config) || !filepath.IsAbs(d.Tmp) || (d.Runtime != "" && !filepath.IsAbs(d.Runtime)) {
		return nil, unsealed("claude directories must be absolute (config %q, tmp %q, runtime %q)", d.Config, d.Tmp, d.Runtime)
	}
	var env []string
	for _, kv := range environ {
		k, _, ok := strings.Cut(kv, "=")
		if ok && slices.Contains(passed, k) {
			env = append(env, kv)
		}
	}
	env = append(env, "CLAUDE_CONFIG_DIR="+d.Config, "CLAUDE_CODE_TMPDIR="+d.Tmp, "TMPDIR="+d.Tmp)
	if d.Runtime != "" {
		env = append(env, "XDG_RUNTIME_DIR="+d.Runtime)
	}
	keys := make([]string, 0, len(file))
	for k := range file {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		if !slices.Contains(EnvFileNames, k) {
			return nil, protocol.Refuse(protocol.CodeEnvFile, "env file name %s is not allowed (only %s)", k, strings.Join(EnvFileNames, ", "))
		}
		env = append(env, k+"="+file[k])
	}
	env = append(env, Forced...)
	return env, CheckEnv(env)
}

// CheckEnv refuses unsealed-engine unless env carries every Forced
// setting and nothing outside the passed, owned and env-file names.
func CheckEnv(env []string) error {
	owned := []string{"CLAUDE_CONFIG_DIR", "CLAUDE_CODE_TMPDIR", "TMPDIR", "XDG_RUNTIME_DIR"}
	seen := map[string]bool{}
	for _, kv := range env {
		k, _, ok := strings.Cut(kv, "=")
		if !ok {
			return unsealed("environment entry %q has no =", kv)
		}
		if seen[k] {
			return unsealed("environment sets %s twice", k)
		}
		seen[k] = true
		if !slices.Contains(passed, k) && !slices.Contains(owned, k) && !slices.Contains(EnvFileNames, k) && !slices.ContainsFunc(Forced, func(f string) bool { return strings.HasPrefix(f, k+"=") }) {
			return unsealed("environment variable %s is not in the seal", k)
		}
	}
	for _, f := range Forced {
		if !slices.Contains(env, f) {
			return unsealed("environment lacks %s", f)
		}
	}
	if !seen["CLAUDE_CONFIG_DIR"] {
		return unsealed("environment lacks CLAUDE_CONFIG_DIR")
	}
	return nil
}

// LoadEnvFile reads the env file a conversation names (conv add
// --env-file): a regular file of one name (no other hard link) reached
// through no symlink, owned by this user, with no permission for group or
// others (0600 or 0400), of
// NAME=VALUE lines whose names are in EnvFileNames; blank lines and #
// comments are skipped; values are taken verbatim (no quotes, no
// expansion). Anything else refuses env-file and names the fix.
//
// No symlink anywhere on the path: a link to the file's directory sits in
// a directory an engine may write (the home), and a tool that replaced it
// would have the conversation's next launch read an env file of its own
// (ANTHROPIC_BASE_URL: its prompts and answers through the tool's server).
func LoadEnvFile(path string) (map[string]string, error) {
	fd, err := detour.Open(path, unix.O_RDONLY|unix.O_CLOEXEC|unix.O_NONBLOCK|unix.O_NOCTTY)
	if err != nil {
		if errors.Is(err, unix.ELOOP) {
			return nil, protocol.Wrap(protocol.CodeEnvFile, err, "env file %s: %s; name the real path (conv add --env-file), "+
				"and keep the key out of any tree you commit (a dotfiles repository a link leads into)", path, linkOnPath(path))
		}
		return nil, protocol.Wrap(protocol.CodeEnvFile, err, "open env file %s", path)
	}
	f := os.NewFile(uintptr(fd), path)
	defer f.Close()
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, protocol.Wrap(protocol.CodeEnvFile, err, "stat env file %s", path)
	}
	switch {
	case st.Mode&unix.S_IFMT != unix.S_IFREG:
		return nil, protocol.Refuse(protocol.CodeEnvFile, "env file %s is not a regular file", path)
	case int(st.Uid) != os.Geteuid():
		return nil, protocol.Refuse(protocol.CodeEnvFile, "env file %s is owned by uid %d, not by you (uid %d)", path, st.Uid, os.Geteuid())
	case st.Mode&0o077 != 0:
		return nil, protocol.Refuse(protocol.CodeEnvFile, "env file %s has mode %04o; it holds a key: chmod 600 %s", path, st.Mode&0o7777, path)
	case st.Size > maxEnvFile:
		return nil, protocol.Refuse(protocol.CodeEnvFile, "env file %s is %d bytes, over %d", path, st.Size, maxEnvFile)
	case st.Nlink != 1:
		// Masks cover a path, not the file: another name of it (a link a
		// backup made, or a tool of an engine that could reach it) stays
		// readable wherever it is.
		return nil, protocol.Refuse(protocol.CodeEnvFile, "env file %s has %d names (hard links): the key is readable under each, and engines mask only this one; "+
			"find them with `find ~ -xdev -samefile %s`, remove the others, or give the key a file of its own (cp %s %s.new && mv %s.new %s)", path, st.Nlink, path, path, path, path, path)
	}
	b, err := io.ReadAll(io.LimitReader(f, maxEnvFile+1))
	if err != nil {
		return nil, protocol.Wrap(protocol.CodeEnvFile, err, "read env file %s", path)
	}
	if string(b) == PlaceholderEnvFile {
		return nil, protocol.Refuse(protocol.CodeEnvFile, "env file %s was missing (mosaic left a placeholder there so no engine could write it); put the conversation's key in it", path)
	}
	return parseEnvFile(path, b)
}

func parseEnvFile(path string, b []byte) (map[string]string, error) {
	out := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 0, 4096), maxEnvFile+1)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSuffix(sc.Text(), "\r")
		if t := strings.TrimSpace(line); t == "" || strings.HasPrefix(t, "#") {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			return nil, protocol.Refuse(protocol.CodeEnvFile, "%s:%d is not NAME=VALUE", path, n)
		}
		if !slices.Contains(EnvFileNames, k) {
			return nil, protocol.Refuse(protocol.CodeEnvFile, "%s:%d sets %s; an env file may set only %s", path, n, nameOf(k), strings.Join(EnvFileNames, ", "))
		}
		if _, dup := out[k]; dup {
			return nil, protocol.Refuse(protocol.CodeEnvFile, "%s:%d sets %s a second time", path, n, k)
		}
		if strings.ContainsRune(v, 0) {
			return nil, protocol.Refuse(protocol.CodeEnvFile, "%s:%d: the value of %s holds a NUL byte", path, n, k)
		}
		out[k] = v
	}
	if err := sc.Err(); err != nil {
		return nil, protocol.Wrap(protocol.CodeEnvFile, err, "read env file %s", path)
	}
	return out, nil
}

// nameOf quotes what a line sets where it is a variable's name, and only
// then: a key pasted alone on a line ("sk-…==") would otherwise be
// printed, in a refusal the user may paste elsewhere.
func nameOf(k string) string {
	if len(k) == 0 || len(k) > 64 || strings.ContainsFunc(k, func(r rune) bool {
		return !(r == '_' || r >= 'A' && r <= 'Z' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9')
	}) || k[0] >= '0' && k[0] <= '9' {
		return "something that is not a variable's name (not shown: it may be a key)"
	}
	return strconv.Quote(k)
}

// linkOnPath names the first symlink on path and, where it resolves, the
// path without links.
func linkOnPath(path string) string {
	d, _ := detour.Find(path)
	odd := d.String()
	if odd == "" {
		return "a symlink is on its path"
	}
	if real, err := filepath.EvalSymlinks(path); err == nil {
		return fmt.Sprintf("%s (the real path is %s)", odd, real)
	}
	return odd
}
