package controller

import (
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/mosaic-agents/mosaic/conversations"
	"github.com/mosaic-agents/mosaic/engine/claude"
	"github.com/mosaic-agents/mosaic/internal/detour"
)

// inputs are the user's files that the controllers give their engines
// and that no engine may change (scopes.Spec.ReadOnly): a tool that
// rewrote one would send another conversation's prompts, and its
// credentials, where it chose, at that conversation's next launch.
//   - Pi's agent directory of every Pi conversation, whose models.json
//     (linked into each engine's own agent directory, agentFiles) sets each
//     provider's base URL and whose auth.json each engine gets a copy of
//     (with its keys, and "!command"s Pi runs to read one), and those two
//     again (a link out of the directory is bound where it leads). Each is
//     made (0700) if missing, the default ~/.pi/agent always: a tool could
//     make a missing one, and the conversation would take what it put
//     there. Its sessions directory stays writable (writable): Pi keeps
//     the sessions of its own runs outside mosaic there. Pi's OAuth
//     refreshes reach the user's auth.json through the controller
//     (authrelay.go), not the engine.
//   - every Claude conversation's env file (ANTHROPIC_BASE_URL), made
//     (with its directory) if missing, as a placeholder its conversation
//     refuses as it refused none (claude.PlaceholderEnvFile): a tool
//     could otherwise write it and the conversation would launch with it.
//     No engine reads one, so they are masked instead (hide, keyMasks).
//
// The conversations are this controller's and every one in the settings
// store; one added after the launch has its files protected from the
// engines launched after it. An agent directory that is the home or
// holds the conversation's project or a conversation's session file
// (outside its sessions directory) is not bound read-only whole (it would
// take an engine's work with it): only its models.json and auth.json are,
// made empty if missing.
//
// unread says which conversations' inputs are not among them because
// their settings did not load (the launch journals it; the engine still
// launches: refusing would let one broken file stop every conversation).
func (c *Controller) inputs() (ro, writable, hide []string, unread string) {
	ro, writable, hide, dirs, alone, unread := planInputs(c.cfg.Conversation)
	for _, d := range dirs {
		// Made so that it is there to bind; one that cannot be made is
		// left to the launch, which notes it absent.
		_ = os.MkdirAll(d, 0o700)
	}
	for m, body := range alone {
		if under(filepath.Dir(m), hide) {
			continue // masked whole: nothing can be made there
		}
		// A directory bound read-only whole cannot take a models.json or
		// an auth.json later; one whose files alone are can, and so can
		// a Claude env file's directory, unless they are there: empty
		// ones (no provider, no key), as Pi reads them, and an env file
		// its conversation refuses as it refused none.
		_ = os.MkdirAll(filepath.Dir(m), 0o700)
		if f, err := os.OpenFile(m, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600); err == nil {
			f.WriteString(body)
			f.Close()
		}
	}
	return ro, writable, hide, unread
}

// engineMasks are what an engine of cv launched now has masked of the
// user's files: mosaic's own state (hidden) and the keys (keyMasks).
func (c *Controller) engineMasks(cv *conversations.Conversation) []string {
	_, _, hide, _, _, _ := planInputs(cv)
	return append(c.hidden(), hide...)
}

// planInputs is inputs for an engine of own, without making anything:
// also the agent directories to make (dirs) and the files to make where
// missing (alone).
func planInputs(own *conversations.Conversation) (ro, writable, hide, dirs []string, alone map[string]string, unread string) {
	cvs := []*conversations.Conversation{own}
	st, err := conversations.Open()
	if err == nil {
		var all []*conversations.Conversation
		var broken map[string]error
		all, broken, err = st.List()
		cvs = append(cvs, all...)
		for _, id := range slices.Sorted(maps.Keys(broken)) {
			unread += fmt.Sprintf("%s (%v); ", id, broken[id])
		}
	}
	if err != nil {
		unread += fmt.Sprintf("every other conversation (%v); ", err)
	}
	unread = strings.TrimSuffix(unread, "; ")
	home, _ := os.UserHomeDir()
	ro, writable, dirs, alone = inputsOf(home, own.Project, cvs)
	config, _ := conversations.ConfigDir()
	hide = keyMasks(own, cvs, ro, dirs, config)
	ro = slices.DeleteFunc(ro, func(p string) bool { return under(p, hide) || missingInBound(p, ro) })
	return ro, writable, hide, dirs, alone, unread
}

// missingInBound says whether p is a file of Pi's that does not exist in
// an agent directory bound read-only whole (ro). inputsOf names the two
// again so that a link out of the directory is bound where it leads; a
// missing one is kept from being made by the directory's bind, and a
// bind of its own would lead nowhere, which fails the launch where a
// link is on the way (~/.pi linked into a dotfiles tree before Pi's
// first login).
func missingInBound(p string, ro []string) bool {
	if b := filepath.Base(p); b != "models.json" && b != "auth.json" || !slices.Contains(ro, filepath.Dir(p)) {
		return false
	}
	_, err := os.Lstat(p)
	return errors.Is(err, fs.ErrNotExist)
}

// EnvFileMasks are the masks of the Claude conversations' env files in an
// engine of own launched now beside the conversations cvs, for a user home
// (as inputs gives them to the launch): an env file named there is masked
// alone, and a save by rename unmasks it in the engines running then
// (mosaicctl doctor warns of it).
func EnvFileMasks(home string, own *conversations.Conversation, cvs []*conversations.Conversation) []string {
	ro, _, agents, _ := inputsOf(home, own.Project, cvs)
	config, _ := conversations.ConfigDir()
	return keyMasks(own, cvs, ro, agents, config)
}

// keyMasks are what every engine gets masked of the Claude conversations'
// env files (scopes.Spec.Hide): none reads one (its controller does, and
// passes the names in the environment), so no tool reads another
// conversation's key. An env file's directory is masked whole where it
// holds nothing else (only *.env files, or env files a conversation names):
// a mask on the file alone is lifted in every engine when the user saves
// it by a rename (as many editors do), and the engine could then read and
// write the new file; the directory's holds. A directory that holds a
// project, a session or an agent directory, or lies in the launching
// conversation's project (its engines work there), or holds anything else,
// has its env files masked alone. Paths are compared as written: neither
// a project's (conversations.CheckPaths) nor an env file's (inputsOf)
// holds a link.
//
// First of all, mosaic's configuration directory (config, where the README
// keeps the keys beside the conversations' settings) is masked whole,
// made if missing, so that a key put there later, by a conversation added
// after the launch, is out of reach of the engines running then too; its
// env files need no mask of their own. Where it holds a path an engine
// works in or runs from (configMask), only its keys directory is, and
// mosaicctl doctor warns.
func keyMasks(own *conversations.Conversation, cvs []*conversations.Conversation, ro, agents []string, config string) []string {
	guarded := guardedPaths(cvs, agents)
	holdsGuarded := func(d string) bool { return d == "/" || heldIn(d, guarded) != "" }
	var dirs, files []string
	if m, _ := configMask(config, guarded, agents); m != "" {
		dirs = append(dirs, m)
	}
	var envs []string
	for _, cv := range cvs {
		if cv != nil && cv.IsClaude() && cv.Claude != nil && filepath.IsAbs(cv.Claude.EnvFile) && slices.Contains(ro, cv.Claude.EnvFile) &&
			!slices.Contains(envs, cv.Claude.EnvFile) && !under(cv.Claude.EnvFile, dirs) {
			envs = append(envs, cv.Claude.EnvFile)
		}
	}
	read := map[string]bool{} // onlyKeys of each directory: read once, and only when asked
	keysOnly := func(d string) bool {
		v, ok := read[d]
		if !ok {
			v = onlyKeys(d, envs)
			read[d] = v
		}
		return v
	}
	for _, env := range envs {
		d := filepath.Dir(env)
		switch {
		case slices.Contains(dirs, d):
		case holdsGuarded(d) || own != nil && own.Project != "" && strings.HasPrefix(d, own.Project+"/") || !keysOnly(d):
			files = append(files, env)
		default:
			dirs = append(dirs, d)
		}
	}
	files = slices.DeleteFunc(files, func(f string) bool { return slices.Contains(dirs, filepath.Dir(f)) })
	return append(dirs, files...)
}

// guardedPaths are the paths some conversation's engine works in or runs
// from: projects, sessions, agent directories, and the engine's files (a
// Claude binary; Pi's entry, package, node and extensions), cleaned (an
// agent directory is stored as typed: keys/.. is the configuration
// directory). A directory holding one is never masked whole.
func guardedPaths(cvs []*conversations.Conversation, agents []string) []string {
	var out []string
	add := func(ps ...string) {
		for _, p := range ps {
			if filepath.IsAbs(p) {
				out = append(out, filepath.Clean(p))
			}
		}
	}
	for _, cv := range cvs {
		if cv == nil {
			continue
		}
		add(cv.Project, cv.Session, cv.Engine.AgentDir, cv.Engine.Path, cv.Engine.Entry, cv.Engine.PackageDir, cv.Engine.Node)
		for _, x := range cv.Engine.Extensions {
			add(x.Path)
		}
		if cv.Claude != nil {
			add(cv.Claude.Path)
		}
	}
	add(agents...)
	return out
}

// heldIn is the first of paths that is d or lies below it ("" if none).
func heldIn(d string, paths []string) string {
	for _, p := range paths {
		if p != "" && (p == d || strings.HasPrefix(p, d+"/")) {
			return p
		}
	}
	return ""
}

// configMask is the mask of mosaic's configuration directory config: the
// directory, or, where it holds one of guarded (held), its keys
// directory, or nothing where that holds one too ("").
//
// Whether config holds a path is asked of config and guarded as written
// and as their links resolve (a dotfiles ~/.config; an agent directory,
// the one guarded path stored as typed, agents, named through a link into
// it): masked whole, config would hide that path from its engine, and its
// launch would fail. Whether keys does is
// asked only as written: the links on a guarded path may be a tool's,
// and one leading into keys must not lift its mask. Either is masked
// only where it is missing or a directory: one a tool of an older engine
// made a link (to the home), a file or a fifo would have the mask land
// where it leads, or fail every launch.
func configMask(config string, guarded, agents []string) (mask, held string) {
	if !filepath.IsAbs(config) {
		return "", ""
	}
	config = filepath.Clean(config)
	held = heldIn(config, guarded)
	var linked []string // the agent directories, as their links resolve
	if held == "" {
		linked = resolved(agents)
		held = heldIn(config, linked)
	}
	if real, err := filepath.EvalSymlinks(config); held == "" && err == nil && real != config {
		held = heldIn(real, append(linked, guarded...))
	}
	if held == "" && config != "/" && maskable(config) {
		return config, ""
	}
	if keys := filepath.Join(config, "keys"); heldIn(keys, guarded) == "" && maskable(keys) {
		return keys, held
	}
	return "", held
}

// resolved is each of paths that resolves to another through links, as
// it resolves.
func resolved(paths []string) []string {
	var out []string
	for _, p := range paths {
		if r, err := filepath.EvalSymlinks(p); err == nil && r != p {
			out = append(out, r)
		}
	}
	return out
}

// maskable says whether d is missing (the mask makes it) or a directory,
// not a link.
func maskable(d string) bool {
	fi, err := os.Lstat(d)
	return errors.Is(err, fs.ErrNotExist) || err == nil && fi.IsDir()
}

// ConfigHeld says how mosaic's configuration directory is masked in the
// engines of the conversations cvs: held names what keeps it from being
// masked whole ("" if nothing, or if it is itself a link or no
// directory), mask what is masked (config where it is masked whole, ""
// where nothing is).
func ConfigHeld(home string, cvs []*conversations.Conversation) (config, mask, held string) {
	config, err := conversations.ConfigDir()
	if err != nil {
		return config, "", ""
	}
	var agents []string
	if len(cvs) > 0 {
		_, _, agents, _ = inputsOf(home, cvs[0].Project, cvs)
	}
	mask, held = configMask(config, guardedPaths(cvs, agents), agents)
	return config, mask, held
}

// under says whether p is one of dirs or lies below one.
func under(p string, dirs []string) bool {
	return slices.ContainsFunc(dirs, func(d string) bool { return p == d || strings.HasPrefix(p, d+"/") })
}

// onlyKeys says whether directory d holds nothing but env files: regular
// files named *.env or named by a conversation (envs), and what an editor
// leaves of one beside it (keyLeftover). One missing holds nothing (the
// mask makes it); one that cannot be read is not judged so.
func onlyKeys(d string, envs []string) bool {
	ents, err := os.ReadDir(d)
	if errors.Is(err, fs.ErrNotExist) {
		return true
	}
	if err != nil {
		return false
	}
	isKey := func(name string) bool {
		return strings.HasSuffix(name, ".env") || slices.Contains(envs, filepath.Join(d, name))
	}
	for _, e := range ents {
		switch {
		case e.Type().IsRegular() && isKey(e.Name()):
		case keyLeftover(e, isKey):
		default:
			return false
		}
	}
	return true
}

// keyLeftover says whether e is what an editor leaves beside a key it
// saved: a backup (x.env~, x.env.bak, x.env.orig), a swap or autosave
// file (.x.env.swp, #x.env#) or a lock (.#x.env, a symlink). Each holds
// the key, or an older one, so a directory of keys and their leftovers
// is still masked whole; counted as another file, it had the directory
// masked no more, and the key alone, its backup readable.
func keyLeftover(e fs.DirEntry, isKey func(string) bool) bool {
	n := e.Name()
	if e.Type()&fs.ModeSymlink != 0 {
		return strings.HasPrefix(n, ".#") && isKey(n[2:])
	}
	if !e.Type().IsRegular() {
		return false
	}
	switch {
	case strings.HasPrefix(n, "#") && strings.HasSuffix(n, "#") && len(n) > 2:
		return isKey(n[1 : len(n)-1])
	case len(n) > len(".x.swp") && strings.HasPrefix(n, ".") && (strings.HasSuffix(n, ".swp") || strings.HasSuffix(n, ".swo")):
		return isKey(n[1 : len(n)-4])
	}
	for _, suffix := range []string{"~", ".bak", ".orig"} {
		if b, ok := strings.CutSuffix(n, suffix); ok && isKey(b) {
			return true
		}
	}
	return false
}

// emptyOf is what inputs makes of a file of Pi's it binds alone when it
// is missing: a models.json that adds no provider, an auth.json of no
// credential.
var emptyOf = map[string]string{"models.json": "{\"providers\":{}}\n", "auth.json": "{}\n"}

// inputsOf is inputs for the home directory, the conversation's project
// and the conversations cvs, with the agent directories to make and the
// files bound alone, to make when missing.
func inputsOf(home, project string, cvs []*conversations.Conversation) (ro, writable, agents []string, alone map[string]string) {
	var sessions []string
	alone = map[string]string{}
	if home != "" {
		agents = append(agents, filepath.Join(home, ".pi", "agent"))
	}
	for _, cv := range cvs {
		if cv == nil {
			continue
		}
		if cv.IsClaude() {
			// An env file whose path holds a link, or a file where a
			// directory should be (a tool's, made in an engine that did
			// not cover it), is left alone: a mask or bind would land
			// where the link leads (the home, the engine's binary) in
			// every engine, or fail every launch, and its conversation
			// refuses it (claude.LoadEnvFile), so it holds no key in use.
			// One whose walk is refused on the way (a directory made
			// unsearchable) is masked as named: a launch that then
			// cannot make or reach it fails, naming it.
			if cv.Claude != nil && filepath.IsAbs(cv.Claude.EnvFile) && !slices.Contains(ro, cv.Claude.EnvFile) && !leadsElsewhere(cv.Claude.EnvFile) {
				ro = append(ro, cv.Claude.EnvFile)
				alone[cv.Claude.EnvFile] = claude.PlaceholderEnvFile
			}
			continue
		}
		sessions = append(sessions, cv.Session)
		if d := cv.Engine.AgentDir; d != "" && filepath.IsAbs(d) && !slices.Contains(agents, filepath.Clean(d)) {
			agents = append(agents, filepath.Clean(d))
		}
	}
	for _, d := range agents {
		m, a := filepath.Join(d, "models.json"), filepath.Join(d, "auth.json")
		if d == "/" || d == home || holds(d, project) || slices.ContainsFunc(sessions, func(s string) bool { return holds(d, s) }) {
			ro = append(ro, m, a)
			alone[m], alone[a] = emptyOf["models.json"], emptyOf["auth.json"]
			continue
		}
		ro = append(ro, d, m, a)
		writable = append(writable, filepath.Join(d, "sessions"))
	}
	return ro, writable, agents, alone
}

// holds says whether p is d or lies below it, other than in d's
// sessions directory (which stays writable).
func holds(d, p string) bool {
	return p != "" && (p == d || strings.HasPrefix(p, d+"/") && !strings.HasPrefix(p, d+"/sessions/"))
}

// leadsElsewhere says whether path holds a symlink, or a file where a
// directory should be (detour.Find).
func leadsElsewhere(path string) bool {
	d, _ := detour.Find(path)
	return d.At != ""
}
