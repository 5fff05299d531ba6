package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/mosaic-agents/mosaic/controller"
	"github.com/mosaic-agents/mosaic/conversations"
	"github.com/mosaic-agents/mosaic/engine/claude"
)

// checkEnvFiles reads every Claude conversation's env file as its launch
// will (claude.LoadEnvFile: a key, mode 0600, one name, no link on the
// path), so a conversation that cannot launch is named first, and warns
// of mosaic's configuration directory left unmasked (it holds a path an
// engine works in) and of an env file some project's engines mask alone,
// whose mask a save by rename lifts in the engines running then
// (docs/security.md), and of a Claude conversation with no key (no env
// file, or one without ANTHROPIC_API_KEY or ANTHROPIC_AUTH_TOKEN), which
// Claude Code answers "Not logged in".
func checkEnvFiles(ctx context.Context) (string, error) {
	list, _, err := registered()
	if err != nil {
		return "", err
	}
	home, _ := os.UserHomeDir()
	return judgeEnvFiles(home, list)
}

// judgeEnvFiles is checkEnvFiles for the home and the conversations list.
// An env file counts as masked alone where the engines of any project
// mask it so (the masks depend on the launching conversation's project
// only: each project's are computed once).
func judgeEnvFiles(home string, list []*conversations.Conversation) (string, error) {
	var n int
	var broken, fixes, alone []string
	masks := map[string][]string{}
	for _, cv := range list {
		if _, done := masks[cv.Project]; !done {
			masks[cv.Project] = controller.EnvFileMasks(home, cv, list)
		}
	}
	var keyless []string // Claude conversations whose engine gets no key
	for _, cv := range list {
		if !cv.IsClaude() || cv.Claude == nil {
			continue
		}
		if cv.Claude.EnvFile == "" {
			keyless = append(keyless, cv.ID+" (no env file)")
			continue
		}
		n++
		env := cv.Claude.EnvFile
		vars, err := claude.LoadEnvFile(env)
		if err == nil && vars["ANTHROPIC_API_KEY"] == "" && vars["ANTHROPIC_AUTH_TOKEN"] == "" {
			keyless = append(keyless, cv.ID+" ("+env+" sets neither ANTHROPIC_API_KEY nor ANTHROPIC_AUTH_TOKEN)")
		}
		if err != nil {
			broken = append(broken, fmt.Sprintf("%s: %v", cv.ID, err))
			fixes = append(fixes, "for "+cv.ID+" mend the file as its error says, or name another with `mosaicctl conv add --project "+shellQuote(cv.Project)+
				" --seat "+shellQuote(cv.Seat)+" --engine-kind claude --engine PATH --resume-session "+cv.SessionKey()+" --env-file FILE --replace` (its other flags as before)")
			continue
		}
		for _, m := range masks {
			if slices.Contains(m, env) {
				alone = append(alone, fmt.Sprintf("%s (%s)", env, cv.ID))
				break
			}
		}
	}
	config, mask, held := controller.ConfigHeld(home, list)
	keys := filepath.Join(config, "keys")
	if len(broken) > 0 {
		return "", failf(strings.Join(fixes, "; "),
			"%d of %d env files cannot be read as a launch reads them: %s", len(broken), n, strings.Join(broken, "; "))
	}
	var fix, why []string
	if config != "" && mask != filepath.Clean(config) {
		covered := "only " + mask + " is"
		if mask == "" {
			covered = "nor its keys directory " + keys + " (it holds such a path too, or is not a directory)"
		}
		cause := "is a link or no directory (a mask there would land where it leads)"
		fix = append(fix, "make "+config+" a directory of its own")
		if held != "" {
			cause = "holds " + held + ", which a conversation's engine works in or runs from"
			fix[len(fix)-1] = "move " + held + " out of " + config + " and give its conversation the new path with `mosaicctl conv add ... --replace`"
		}
		why = append(why, fmt.Sprintf("mosaic's configuration directory %s %s, so no engine masks it whole: %s, and a key elsewhere in it is out of reach only of the engines launched after its conversation was added",
			config, cause, covered))
	}
	if len(alone) > 0 {
		fix = append(fix, "move the env files masked alone under mosaic's configuration directory (`install -d -m 0700 "+keys+"`), which every engine masks whole, and give each conversation its new path with `mosaicctl conv add` (its flags as before, `--resume-session` with its session, `--env-file FILE --replace`)")
		why = append(why, fmt.Sprintf("%d of %d env files are masked alone in some project's engines (their directory holds other files, or lies in that project): a save by rename unmasks one in the engines running then: %s",
			len(alone), n, strings.Join(alone, ", ")))
	}
	if len(keyless) > 0 {
		fix = append(fix, "put ANTHROPIC_API_KEY=... in each conversation's env file (read at each launch; an engine running keeps what it had until `mosaicctl stop --take --yes ID` and `mosaicctl recover --take ID`), or give one with `mosaicctl conv add` (its flags as before, `--env-file FILE --replace`)")
		why = append(why, fmt.Sprintf("%d Claude conversations have no key, so Claude Code answers each of their prompts \"Not logged in\" (their engines never read ~/.claude nor mosaic's environment): %s",
			len(keyless), strings.Join(keyless, ", ")))
	}
	switch {
	case len(why) > 0:
		return "", warnf(strings.Join(fix, "; "), "%s", strings.Join(why, "; "))
	case n == 0:
		return "no Claude conversation names an env file", nil
	}
	if n == 1 {
		return "1 env file readable as a launch reads it, in a directory masked whole in every engine", nil
	}
	return fmt.Sprintf("%d env files readable as a launch reads them, each in a directory masked whole in every engine", n), nil
}
