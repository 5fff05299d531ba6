package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/mosaic-agents/mosaic/conversations"
	"github.com/mosaic-agents/mosaic/engine"
	"github.com/mosaic-agents/mosaic/engine/pi"
	"github.com/mosaic-agents/mosaic/protocol"
	"github.com/urfave/cli/v2"
)

func convCommand() *cli.Command {
	return &cli.Command{
		Name:  "conv",
		Usage: "add, list, show and remove conversations",
		Subcommands: []*cli.Command{
			convAddCommand(),
			{
				Name:  "list",
				Usage: "list conversations",
				Action: func(c *cli.Context) error {
					s, err := conversations.Open()
					if err != nil {
						return err
					}
					list, bad, err := s.List()
					if err != nil {
						return err
					}
					w := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
					fmt.Fprintln(w, "ID\tSEAT\tWORKSPACE\tSESSION\tPROJECT")
					for _, cv := range list {
						fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\n", cv.ID, cv.Seat, cv.Workspace, filepath.Base(cv.SessionKey()), cv.Project)
					}
					w.Flush()
					reportUnloadable(bad)
					return nil
				},
			},
			{
				Name:      "show",
				Usage:     "print a conversation's settings",
				ArgsUsage: "ID",
				Action: func(c *cli.Context) error {
					cv, err := loadArg(c)
					if err != nil {
						return err
					}
					b, err := conversations.Encode(cv)
					if err != nil {
						return err
					}
					if _, err = os.Stdout.Write(b); err != nil {
						return err
					}
					ctx, cancel := context.WithTimeout(c.Context, 10*time.Second)
					defer cancel()
					showRunning(ctx, os.Stdout, cv)
					return nil
				},
			},
			{
				Name:      "rm",
				Usage:     "remove a conversation (its session file is never touched)",
				ArgsUsage: "ID",
				Action:    runConvRm,
			},
		},
	}
}

// reportUnloadable names on stderr, in id order, the conversation files
// that List could not load: they are skipped, never fatal, so one broken
// file does not hide the others.
func reportUnloadable(bad map[string]error) {
	ids := make([]string, 0, len(bad))
	for id := range bad {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		fmt.Fprintf(os.Stderr, "mosaicctl: %s does not load: %v\n", id, bad[id])
	}
}

func loadArg(c *cli.Context) (*conversations.Conversation, error) {
	id, err := idArg(c)
	if err != nil {
		return nil, err
	}
	s, err := conversations.Open()
	if err != nil {
		return nil, err
	}
	return s.Load(id)
}

func convAddCommand() *cli.Command {
	return &cli.Command{
		Name:  "add",
		Usage: "register a conversation and print its id",
		Description: "The session file must sit at PROJECT/.pi/state/SEAT/sessions/NAME.jsonl. It may not\n" +
			"exist yet (Pi writes it lazily) but its directory must. The id alone goes to stdout.",
		Flags: append([]cli.Flag{
			&cli.StringFlag{Name: "project", Usage: "absolute project root `DIR`", Required: true},
			&cli.StringFlag{Name: "seat", Usage: "seat `NAME`", Required: true},
			&cli.StringFlag{Name: "session", Usage: "absolute session `FILE` (.jsonl); Pi only, required there"},
			&cli.StringFlag{Name: "workspace", Usage: "workspace `NAME`", Value: conversations.DefaultWorkspace},
			&cli.StringFlag{Name: "engine", Usage: "the `pi` executable or its entry file (default: pi from PATH; a relative path is taken from the current directory), pinned now by its absolute path"},
			&cli.StringFlag{Name: "node", Usage: "the Node `PATH` to run the engine with (default: the one the engine's wrapper names, else the node on this PATH), pinned now"},
			&cli.StringFlag{Name: "provider", Usage: "Pi --provider `NAME`"},
			&cli.StringFlag{Name: "model", Usage: "the engine's --model `NAME` (Pi or Claude)"},
			&cli.StringFlag{Name: "thinking", Usage: "Pi --thinking `LEVEL`"},
			&cli.StringFlag{Name: "agent-dir", Usage: "the Pi agent `DIR` whose models.json and auth.json the engine uses (default ~/.pi/agent); its settings.json and extensions are never loaded: the controller gives the engine an agent directory of its own"},
			&cli.StringFlag{Name: "memory-max", Usage: "MemoryMax= of the engine's scope: `SIZE` in bytes with K, M, G, T suffixes (base 1024), N% of physical memory, or infinity; e.g. 4G"},
			&cli.StringFlag{Name: "tasks-max", Usage: "TasksMax= of the engine's scope: a `COUNT`, N% of the system's task limit, or infinity"},
			&cli.StringFlag{Name: "cpu-quota", Usage: "CPUQuota= of the engine's scope: `PERCENT` of one CPU, e.g. 200% for two CPUs"},
			&cli.StringSliceFlag{Name: "extension", Usage: "a reviewed Pi extension `FILE` to load (-e under --no-extensions), pinned now by real path and SHA-256; repeatable; it runs with the engine's full rights (docs/security.md)"},
			&cli.StringFlag{Name: "idle-stop", Usage: "hibernate after `DURATION` idle (no run, client, tool process, queued item or pending approval): the engine ends with a proof and the next client wakes it on the same leaf; default off"},
			&cli.BoolFlag{Name: "replace", Usage: "replace an existing conversation's settings"},
			deviceFlag(),
		}, claudeAddFlags()...),
		Action: func(c *cli.Context) error {
			if c.String("engine-kind") == engine.KindClaude {
				cv, err := claudeConversation(c)
				if err != nil {
					return err
				}
				return saveConversation(c, cv)
			}
			if err := refuseClaudeFlags(c); err != nil {
				return err
			}
			session := c.String("session")
			if session == "" {
				return protocol.Refuse(protocol.CodeUsage, "conv add needs --session FILE for a Pi conversation (or --engine-kind claude)")
			}
			if t := c.String("thinking"); t != "" && !slices.Contains(pi.ThinkingLevels, t) {
				return usageError("--thinking %q is not a level Pi accepts; use one of %s", t, strings.Join(pi.ThinkingLevels, ", "))
			}
			cv := &conversations.Conversation{
				Project:   c.String("project"),
				Seat:      c.String("seat"),
				Workspace: c.String("workspace"),
				Session:   session,
				Engine: conversations.Engine{
					Provider: c.String("provider"), Model: c.String("model"),
					Thinking: c.String("thinking"), AgentDir: c.String("agent-dir"),
				},
			}
			limits, err := limitsFromFlags(c.String("memory-max"), c.String("tasks-max"), c.String("cpu-quota"))
			if err != nil {
				return err
			}
			cv.Limits = limits
			cv.IdleStop = c.String("idle-stop")
			if cv.Devices, err = devicesOf(c); err != nil {
				return err
			}
			cv.ID = conversations.ID(cv.Project, cv.Seat, filepath.Base(session))
			if err := cv.Validate(); err != nil {
				return err
			}
			if err := cv.CheckPaths(); err != nil {
				return err
			}
			if err := pinEngine(cv, c.String("engine"), c.String("node")); err != nil {
				return err
			}
			if err := pinExtensions(cv, c.StringSlice("extension")); err != nil {
				return err
			}
			if err := saveConversation(c, cv); err != nil {
				return err
			}
			if cv.Engine.Path == "" {
				fmt.Fprintln(os.Stderr, noPiWarning(cv.ID))
			}
			return nil
		},
	}
}

// saveConversation stores cv unless a conversation with other settings
// has its id and --replace was not given, and prints the id.
func saveConversation(c *cli.Context, cv *conversations.Conversation) error {
	s, err := conversations.Open()
	if err != nil {
		return err
	}
	old, err := s.Load(cv.ID)
	switch {
	case err == nil && old.Same(cv):
		noteHomes(c.Context, os.Stderr)
		fmt.Println(cv.ID) // the same settings: nothing to do
		return nil
	case err == nil && !c.Bool("replace"):
		return protocol.Refuse(protocol.CodeConversationExists,
			"conversation %s exists with other settings; pass --replace to change them (see `mosaicctl conv show %s`)", cv.ID, cv.ID)
	case err != nil && protocol.CodeOf(err) != protocol.CodeUnknownConv && !c.Bool("replace"):
		return err
	}
	if err := refuseTakenSeat(s, cv); err != nil {
		return err
	}
	saved := time.Now()
	if err := s.Save(cv); err != nil {
		return err
	}
	if old != nil {
		run := engineRunning(c.Context, cv.ID)
		restartIdle(c.Context, old, cv, saved, &run)
		reportReplace(os.Stderr, old, cv, run)
	}
	noteEnvFileReach(os.Stderr, s, cv)
	noteNoKey(os.Stderr, cv)
	noteHomes(c.Context, os.Stderr)
	fmt.Println(cv.ID)
	return nil
}

// refuseTakenSeat refuses a conversation on a seat tuple another
// registered conversation uses. The claim store lets one engine hold a
// seat (W4), and a controller launches when its socket is first used: the
// second conversation's controller could only refuse to start for as long
// as the first one's claim holds the seat, which nothing would have said
// at conv add.
func refuseTakenSeat(s *conversations.Store, cv *conversations.Conversation) error {
	others, err := s.OnSeat(cv)
	if err != nil || len(others) == 0 {
		return err
	}
	o := others[0]
	if cv.IsClaude() {
		// A Claude conversation has no --session: conv add chose a new
		// session, so the same command run again lands here on the
		// conversation it added the first time.
		keep := ""
		if o.IsClaude() && o.Claude != nil {
			keep = fmt.Sprintf("; it may be the one you want: `mosaicctl conv show %s` (its env file is read at every launch, so a key put in it needs no conv add), and once its session has a transcript (a prompt ran) its settings change with `mosaicctl conv add --project %s --seat %s%s --engine-kind claude --engine PATH --resume-session %s --replace` (its other flags as wanted)",
				o.ID, shellQuote(o.Project), shellQuote(o.Seat), workspaceFlag(o), o.Claude.Session)
		}
		return protocol.Refuse(protocol.CodeConfiguration,
			"seat %s of project %s (workspace %s) is taken by conversation %s (session %s): a seat runs one conversation%s; else remove that one first (`mosaicctl conv rm %s`), or add this one on another seat (--seat NAME)",
			cv.Seat, cv.Project, cv.Workspace, o.ID, o.SessionKey(), keep, o.ID)
	}
	return protocol.Refuse(protocol.CodeConfiguration,
		"seat %s of project %s (workspace %s) is taken by conversation %s (session %s): a seat runs one conversation; remove that one first (`mosaicctl conv rm %s`), or add this one on another seat (--seat NAME, its --session under %s)",
		cv.Seat, cv.Project, cv.Workspace, o.ID, o.SessionKey(), o.ID, conversations.SessionPath(cv.Project, "NAME", ""))
}

// workspaceFlag is the --workspace flag that names o's workspace, or
// nothing for the default one.
func workspaceFlag(o *conversations.Conversation) string {
	if o.Workspace == "" || o.Workspace == conversations.DefaultWorkspace {
		return ""
	}
	return " --workspace " + shellQuote(o.Workspace)
}

// runConvRm removes a conversation. A file that does not load (bad TOML,
// an unknown key, a field that does not validate) is removed too, after
// the same checks by id: `conv rm` is the fix every such refusal names,
// so it must not refuse for the same reason.
func runConvRm(c *cli.Context) error {
	id, err := idArg(c)
	if err != nil {
		return err
	}
	s, err := conversations.Open()
	if err != nil {
		return err
	}
	cv, loadErr := s.Load(id)
	if loadErr != nil && protocol.CodeOf(loadErr) != protocol.CodeConfiguration {
		return loadErr
	}
	ctx, cancel := context.WithTimeout(c.Context, 10*time.Second)
	defer cancel()
	if err := refuseLiveEngines(ctx, id, "conv rm "+id); err != nil {
		return err
	}
	if err := refuseActiveSocket(ctx, id); err != nil {
		return err
	}
	if loadErr == nil {
		if err := refuseHeldSeat(ctx, cv); err != nil {
			return err
		}
	} else if err := refuseHeldSeatOf(ctx, id, loadErr); err != nil {
		return err
	}
	if err := s.Remove(id); err != nil {
		return err
	}
	if loadErr != nil {
		fmt.Printf("removed %s, whose file did not load (no session file is touched)\n", id)
		return nil
	}
	fmt.Printf("removed %s (the session %s is untouched)\n", id, cv.SessionKey())
	return nil
}
