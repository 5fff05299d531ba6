package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/mosaic-agents/mosaic/controller"
	"github.com/mosaic-agents/mosaic/conversations"
	"github.com/mosaic-agents/mosaic/engine"
	"github.com/mosaic-agents/mosaic/engine/claude"
	"github.com/mosaic-agents/mosaic/protocol"
	"github.com/urfave/cli/v2"
)

// envFileFlag is --env-file; its refusals carry the code of the same name.
const envFileFlag = protocol.CodeEnvFile

// claudeAddFlags are conv add's engine-kind flags.
func claudeAddFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "engine-kind", Usage: "`KIND` of engine: pi (default) or claude (Claude Code " + claude.PinnedVersion + ", --engine names its native binary)", Value: engine.KindPi},
		&cli.StringFlag{Name: envFileFlag, Usage: "claude: the `FILE` (mode 0600, yours, no other hard link, no symlink on its path) holding ANTHROPIC_API_KEY, ANTHROPIC_AUTH_TOKEN or ANTHROPIC_BASE_URL, masked in every engine launched after (under $XDG_CONFIG_HOME/mosaic, such as ~/.config/mosaic/keys: in every engine, those running now too); the engine gets no credential from the controller's environment"},
		&cli.StringFlag{Name: "resume-session", Usage: "claude: adopt the session `UUID` whose transcript already sits in the conversation's config directory, instead of a new one"},
	}
}

// piOnlyFlags are the conv add flags a Claude conversation refuses:
// each would be silently ignored otherwise.
var piOnlyFlags = []string{"session", "node", "provider", "thinking", "agent-dir", "extension"}

// claudeConversation builds a Claude conversation from conv add's flags:
// the session UUID the controller chooses (or --resume-session's), the
// binary pinned now, the env file and the adopted transcript checked now.
func claudeConversation(c *cli.Context) (*conversations.Conversation, error) {
	for _, f := range piOnlyFlags {
		if c.IsSet(f) && f == "session" {
			return nil, protocol.Refuse(protocol.CodeUsage, "--%s is a Pi setting; a Claude conversation does not take it (the controller chooses the session: --resume-session UUID adopts one)", f)
		}
		if c.IsSet(f) {
			// Not the session's advice: it answers another flag.
			return nil, protocol.Refuse(protocol.CodeUsage, "--%s is a Pi setting; a Claude conversation does not take it (drop it: Claude's settings are --env-file, --model and --resume-session)", f)
		}
	}
	if c.String("engine") == "" {
		return nil, protocol.Refuse(protocol.CodeUsage, "--engine-kind claude needs --engine PATH, the Claude Code %s binary (contrib/claude/install.sh installs it)", claude.PinnedVersion)
	}
	cl := &conversations.Claude{Model: c.String("model"), EnvFile: c.String(envFileFlag), Session: c.String("resume-session")}
	if cl.Session != "" {
		if !claude.ValidSession(cl.Session) {
			return nil, protocol.Refuse(protocol.CodeUsage, "--resume-session %q is not a session UUID (lowercase, as the transcript's file name)", cl.Session)
		}
		cl.Adopted = true
	} else {
		cl.Session = claude.NewSession()
	}
	cv := &conversations.Conversation{
		Project: c.String("project"), Seat: c.String("seat"), Workspace: c.String("workspace"),
		EngineKind: engine.KindClaude, Claude: cl, IdleStop: c.String("idle-stop"),
	}
	limits, err := limitsFromFlags(c.String("memory-max"), c.String("tasks-max"), c.String("cpu-quota"))
	if err != nil {
		return nil, err
	}
	cv.Limits = limits
	if cv.Devices, err = devicesOf(c); err != nil {
		return nil, err
	}
	cv.ID = conversations.ID(cv.Project, cv.Seat, cl.Session)
	if err := cv.Validate(); err != nil {
		return nil, err
	}
	if err := cv.CheckPaths(); err != nil {
		return nil, err
	}
	pin, err := claude.Resolve(c.Context, c.String("engine"), os.Environ())
	if err != nil {
		return nil, err
	}
	cl.Path, cl.Version, cl.SHA256 = pin.Path, pin.Version, pin.SHA256
	return cv, cv.Validate()
}

// refuseClaudeFlags refuses the Claude-only flags on a Pi conversation.
func refuseClaudeFlags(c *cli.Context) error {
	if k := c.String("engine-kind"); k != engine.KindPi {
		return protocol.Refuse(protocol.CodeUsage, "--engine-kind %q: pi or claude", k)
	}
	for _, f := range []string{envFileFlag, "resume-session"} {
		if c.IsSet(f) {
			return protocol.Refuse(protocol.CodeUsage, "--%s is a Claude setting; add --engine-kind claude", f)
		}
	}
	return nil
}

// noteNoKey says, as a Claude conversation is added, that it names no
// key: no --env-file, or one that sets neither ANTHROPIC_API_KEY nor
// ANTHROPIC_AUTH_TOKEN (README's `install -m 0600 /dev/null` makes it
// empty). Its engine reads no key from mosaic's environment nor a login
// from ~/.claude (its config directory is its own), so every prompt would
// be answered "Not logged in · Please run /login", and a prompt starting
// with / is refused text-policy. The file is read at every launch: the
// key put there applies at the next one.
func noteNoKey(w io.Writer, cv *conversations.Conversation) {
	if !cv.IsClaude() || cv.Claude == nil {
		return
	}
	if cv.Claude.EnvFile == "" {
		fmt.Fprintf(w, "mosaicctl: note: %s has no env file, so its engine has no key (it never reads ~/.claude nor mosaic's environment) and Claude Code answers every prompt \"Not logged in\": "+
			"add it again with --env-file FILE (ANTHROPIC_API_KEY=... in a 0600 file under ~/.config/mosaic/keys)\n", cv.ID)
		return
	}
	env, err := claude.LoadEnvFile(cv.Claude.EnvFile)
	if err != nil || env["ANTHROPIC_API_KEY"] != "" || env["ANTHROPIC_AUTH_TOKEN"] != "" {
		return
	}
	fmt.Fprintf(w, "mosaicctl: note: %s sets neither ANTHROPIC_API_KEY nor ANTHROPIC_AUTH_TOKEN, so Claude Code answers every prompt of %s \"Not logged in\": "+
		"put ANTHROPIC_API_KEY=... in it before the first prompt (it is read at each launch; an engine launched without it keeps none until `mosaicctl stop --take --yes %s`, then `mosaicctl recover --take %s`)\n", cv.Claude.EnvFile, cv.ID, cv.ID, cv.ID)
}

// noteEnvFileReach says, as a Claude conversation is added, that its env
// file is out of reach only of the engines launched from now on: an
// engine's masks are made at its launch, from the conversations known
// then. Only what every engine masks whole (mosaic's configuration
// directory, or its keys where the directory holds an engine's files)
// covers the engines running now too.
func noteEnvFileReach(w io.Writer, s *conversations.Store, cv *conversations.Conversation) {
	if !cv.IsClaude() || cv.Claude == nil || cv.Claude.EnvFile == "" {
		return
	}
	list, _, err := s.List()
	if err != nil {
		return
	}
	home, _ := os.UserHomeDir()
	config, mask, _ := controller.ConfigHeld(home, list)
	env := filepath.Clean(cv.Claude.EnvFile)
	if mask != "" && (env == mask || strings.HasPrefix(env, mask+"/")) {
		return
	}
	where := "under " + filepath.Join(config, "keys") + " a key is masked in every engine, those running now too"
	if mask == "" {
		where = "`mosaicctl doctor`, its env-files line, says why no engine masks " + config + " or its keys directory"
	}
	fmt.Fprintf(w, "mosaicctl: note: %s is masked in the engines launched from now on; an engine running now can read it until it stops (%s)\n", env, where)
}
