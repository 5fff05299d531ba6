package main

import (
	"errors"
	"strings"
	"testing"

	"github.com/mosaic-agents/mosaic/conversations"
)

// TestReplaceReportNamesTheRelaunch: conv add --replace names the stop and
// the recover, with the flags they need, only when an engine runs (or
// whether one does is unknown), and every command it names works as typed.
func TestReplaceReportNamesTheRelaunch(t *testing.T) {
	old := &conversations.Conversation{ID: anID, Workspace: "default"}
	limits := *old
	limits.Limits.MemoryMax = conversations.MemoryMax{Bytes: 2 << 30}
	workspace := *old
	workspace.Workspace = "other"
	engine := *old
	engine.Engine.Entry = "/opt/pi/dist/cli.js"
	relaunch := "`mosaicctl stop --take --yes " + anID + "`, then `mosaicctl recover --take " + anID + "`"
	restart := "`systemctl --user restart mosaic-conv@" + anID + ".service`"
	stopRestart := "`mosaicctl stop --take --yes " + anID + "`, then " + restart
	for _, tc := range []struct {
		name      string
		cv        *conversations.Conversation
		run       runningEngine
		want, not []string
	}{
		{"limits, engine running", &limits, runningEngine{live: true}, []string{relaunch}, nil},
		{"limits, no engine", &limits, runningEngine{}, []string{"none runs now"}, []string{"mosaicctl stop", "recover"}},
		{"limits, unknown", &limits, runningEngine{err: errors.New("no bus")}, []string{"unknown (no bus)", relaunch}, nil},
		{"workspace, engine running", &workspace, runningEngine{live: true}, []string{stopRestart}, nil},
		{"workspace, no engine", &workspace, runningEngine{}, []string{restart}, []string{"mosaicctl stop"}},
		{"workspace, restarted", &workspace, runningEngine{restarted: true}, []string{"was restarted for it", "restarted mosaic-conv@" + anID + ".service"}, []string{restart}},
		{"engine, never ran", &engine, runningEngine{}, []string{restart}, nil},
		{"engine, restarted", &engine, runningEngine{restarted: true}, []string{"was restarted for it and launches it now"}, []string{restart}},
		{"engine, restart failed", &engine, runningEngine{restartErr: errors.New("no bus")}, []string{"restarting it for the change failed (no bus): " + restart}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var b strings.Builder
			reportReplace(&b, old, tc.cv, tc.run)
			for _, w := range tc.want {
				if !strings.Contains(b.String(), w) {
					t.Errorf("report lacks %s:\n%s", w, b.String())
				}
			}
			for _, w := range tc.not {
				if strings.Contains(b.String(), w) {
					t.Errorf("report names %s:\n%s", w, b.String())
				}
			}
			if strings.Contains(b.String(), "mosaicctl stop "+anID) || strings.Contains(b.String(), "mosaicctl recover "+anID) {
				t.Errorf("report names a stop or recover without the flags it needs:\n%s", b.String())
			}
		})
	}
}

// TestNoPiWarning: conv add without pi on PATH names the add that gives
// the saved conversation an engine, --replace included (without it the add
// is refused conversation-exists).
func TestNoPiWarning(t *testing.T) {
	s, cv := storedConversation(t, "/home/a/app", conversations.Engine{Thinking: "high"})
	for _, tc := range []struct {
		name   string
		remove bool // before the warning is built
		want   string
	}{
		{"saved", false, "`mosaicctl conv add --engine PATH --replace --project /home/a/app --seat alice --workspace default " +
			"--session /home/a/app/.pi/state/alice/sessions/main.jsonl --thinking high`"},
		{"not loadable", true, "`mosaicctl conv add --engine PATH --replace` and the flags you gave"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.remove {
				if err := s.Remove(cv.ID); err != nil {
					t.Fatal(err)
				}
			}
			if got := noPiWarning(cv.ID); !strings.Contains(got, tc.want) {
				t.Fatalf("warning %q; want it to name %s", got, tc.want)
			}
		})
	}
}
