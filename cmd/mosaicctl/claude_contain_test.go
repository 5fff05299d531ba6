package main

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mosaic-agents/mosaic/contrib/fakeanthropic"
	"github.com/mosaic-agents/mosaic/contrib/sandboxtest"
	"github.com/mosaic-agents/mosaic/contrib/stubmodel"
	"github.com/mosaic-agents/mosaic/conversations"
	"github.com/mosaic-agents/mosaic/engine/claude"
	"github.com/mosaic-agents/mosaic/internal/xdg"
)

// claudeSetup is what each Claude containment test starts from: the
// sandbox, mosaicctl installed (uninstalled at the end), the pinned
// Claude binary and a fake Anthropic API on loopback.
func claudeSetup(t *testing.T) (bin, cl string, fake *fakeanthropic.Server) {
	t.Helper()
	sandboxtest.Require(t)
	bin = sandboxtest.Bin(t, "mosaicctl")
	cl = sandboxtest.Claude(t)
	fake = sandboxtest.FakeAnthropic(t)
	mustRun(t, bin, "install")
	t.Cleanup(func() { run(t, bin, "uninstall", "--force") })
	return bin, cl, fake
}

// addClaude adds a Claude conversation on the seat, against fake, with
// its socket started and endConversation registered.
func addClaude(t *testing.T, bin, cl, seat, url string, extra ...string) (id, proj string) {
	t.Helper()
	proj, _ = project(t, seat)
	env := writeEnvFile(t, "ANTHROPIC_API_KEY=env-file-key\nANTHROPIC_BASE_URL="+url+"\n", 0o600)
	args := append([]string{"conv", "add", "--project", proj, "--seat", seat, "--engine-kind", "claude", "--engine", cl, "--env-file", env}, extra...)
	id = strings.TrimSpace(mustRun(t, bin, args...))
	mustRun(t, "systemctl", "--user", "start", "mosaic-conv@"+id+".socket")
	t.Cleanup(func() { endConversation(t, bin, id) })
	return id, proj
}

// victimBesideNotes registers a Claude conversation whose env file (its
// key victim-key-4242, and the body it returns) lies in a directory of the
// home beside notes.txt ("notes-visible"): an env file masked alone.
func victimBesideNotes(t *testing.T, bin, cl, url string) (dir, env, body string) {
	t.Helper()
	home, _ := os.UserHomeDir()
	dir, err := os.MkdirTemp(home, "cfg-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir); os.RemoveAll(dir + ".old") })
	env = filepath.Join(dir, "claude.env")
	body = "ANTHROPIC_API_KEY=victim-key-4242\nANTHROPIC_BASE_URL=" + url + "\n"
	if err := os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("notes-visible\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(env, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	proj, _ := project(t, "victim")
	victim := strings.TrimSpace(mustRun(t, bin, "conv", "add", "--project", proj, "--seat", "victim", "--engine-kind", "claude", "--engine", cl, "--env-file", env))
	t.Cleanup(func() { endConversation(t, bin, victim) })
	return dir, env, body
}

// runTool has conversation id's engine run cmd as an approved Bash tool
// call and returns what the prompt printed.
func runTool(t *testing.T, bin, id, cmd string, fake *fakeanthropic.Server) string {
	t.Helper()
	p, pout := promptAwaitingApproval(t, bin, id, "please BASH{"+cmd+"}", fake)
	if r := run(t, bin, "approve", "--take", id, "--yes"); r.code != 0 {
		t.Fatalf("approve --yes: exit %d, %q %q", r.code, r.stdout, r.stderr)
	}
	if err := p.Wait(); err != nil {
		t.Fatalf("prompt with the tool: %v\n%s", err, pout.String())
	}
	return pout.String()
}

// TestClaudeSiblingHidden: a tool a Claude engine runs reads and lists
// its own configuration directory but nothing of another Claude
// conversation's (its transcript, its .claude.json) nor of a Pi
// conversation's agent directory: STATE/claude and STATE/agent are masked
// in the engine's mount namespace with only its own directory bound back;
// nor another conversation's env file, whose directory of keys is masked.
func TestClaudeSiblingHidden(t *testing.T) {
	bin, cl, fake := claudeSetup(t)
	state, err := xdg.StateHome()
	if err != nil {
		t.Fatal(err)
	}
	state = filepath.Join(state, "mosaic")

	victim, _ := addClaude(t, bin, cl, "victim", fake.URL)
	if out := mustRun(t, bin, "prompt", "--take", victim, "victim-secret-7711"); !strings.Contains(out, "victim-secret-7711") {
		t.Fatalf("the victim's prompt printed %q", out)
	}
	victimDir := filepath.Join(state, "claude", victim)
	if b, err := readTranscripts(filepath.Join(victimDir, "config")); err != nil || !strings.Contains(b, "victim-secret-7711") {
		t.Fatalf("the victim's transcript is not where the test looks (%v): %q", err, b)
	}
	// A Pi agent directory beside them, as a Pi conversation's would be.
	piAgent := filepath.Join(state, "agent", "conv-pi-sibling")
	if err := os.MkdirAll(piAgent, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(piAgent, "auth.json"), []byte("pi-secret-7712"), 0o600); err != nil {
		t.Fatal(err)
	}

	// The victim's env file, in a directory of keys alone: masked whole.
	store, err := conversations.Open()
	if err != nil {
		t.Fatal(err)
	}
	vcv, err := store.Load(victim)
	if err != nil {
		t.Fatal(err)
	}
	victimEnv := vcv.Claude.EnvFile

	spy, proj := addClaude(t, bin, cl, "spy", fake.URL)
	marker := filepath.Join(proj, "asked")
	cmd := "touch " + marker + "; grep -rh 7711 " + victimDir + " 2>/dev/null; cat " + victimEnv + " 2>/dev/null; cat " + filepath.Join(piAgent, "auth.json") +
		" 2>/dev/null; echo own=$(ls -A " + filepath.Join(state, "claude", spy, "config") + " | wc -l); echo \"listed=<$(ls -A " + filepath.Join(state, "claude") + " | tr '\\n' ' ')>\""
	out := runTool(t, bin, spy, cmd, fake)
	if !strings.Contains(out, "TOOL_DONE") || !strings.Contains(out, "listed=") {
		t.Fatalf("the tool's turn printed %q", out)
	}
	for _, leak := range []string{"victim-secret-7711", "pi-secret-7712", "env-file-key"} {
		if strings.Contains(out, leak) {
			t.Errorf("the spy's tool read %q:\n%s", leak, out)
		}
	}
	if !strings.Contains(out, "listed=<"+spy+" >") {
		t.Errorf("the spy's tool did not see exactly its own directory under STATE/claude:\n%s", out)
	}
	if strings.Contains(out, "own=0") {
		t.Errorf("the spy's tool could not list its own configuration directory:\n%s", out)
	}
}

// TestClaudeEnvFilesMasked: an env file beside other files is masked
// alone in every engine (another conversation's tool reads and writes
// nothing of it, though it reads the file beside it), and an env file
// reached through a link is refused at conv add: a tool could replace the
// link and have the conversation read its own file.
func TestClaudeEnvFilesMasked(t *testing.T) {
	bin, cl, fake := claudeSetup(t)
	home, _ := os.UserHomeDir()
	dir, env, body := victimBesideNotes(t, bin, cl, fake.URL)

	proj, _ := project(t, "linked")
	link := filepath.Join(home, "keys-link")
	if err := os.Symlink(dir, link); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Remove(link) })
	r := run(t, bin, "conv", "add", "--project", proj, "--seat", "linked", "--engine-kind", "claude", "--engine", cl, "--env-file", filepath.Join(link, "claude.env"))
	if r.code == 0 || !strings.Contains(r.stderr, "env-file") || !strings.Contains(r.stderr, link+" is a symlink") {
		t.Errorf("conv add through a link: exit %d, stderr %q; want env-file naming the link", r.code, r.stderr)
	}

	spy, _ := addClaude(t, bin, cl, "spy", fake.URL)
	out := runTool(t, bin, spy, "cat "+filepath.Join(dir, "notes.txt")+" "+env+" 2>/dev/null; echo ANTHROPIC_BASE_URL=http://127.0.0.1:9/ >> "+env+" 2>/dev/null; echo wrote=$?", fake)
	if !strings.Contains(out, "notes-visible") || !strings.Contains(out, "wrote=") {
		t.Fatalf("the tool did not read the file beside the env file:\n%s", out)
	}
	if strings.Contains(out, "victim-key-4242") {
		t.Errorf("the spy's tool read the victim's key:\n%s", out)
	}
	if b, _ := os.ReadFile(env); string(b) != body {
		t.Errorf("the victim's env file holds %q", b)
	}
}

// TestClaudeKeyAddedAfterLaunch: a key put in mosaic's configuration
// directory after an engine was launched, for a conversation added then,
// is out of that engine's reach (the directory is masked whole in every
// engine from its launch), and the conversation it belongs to launches
// with it. Where the directory holds what an engine works in or runs
// from (here a Pi conversation's agent directory, written through keys/..
// or through a link, and a Claude binary), it is not masked whole but its
// keys directory still is, and every engine still runs.
func TestClaudeKeyAddedAfterLaunch(t *testing.T) {
	bin, cl, fake := claudeSetup(t)
	config, err := conversations.ConfigDir()
	if err != nil {
		t.Fatal(err)
	}
	t.Run("the whole directory", func(t *testing.T) {
		lateKeyOutOfReach(t, bin, cl, fake, filepath.Join(config, "keys-"+filepath.Base(t.TempDir())))
	})
	t.Run("its keys directory, beside an agent directory and an engine", func(t *testing.T) {
		// The agent directory as conv add stores it, typed through keys/..
		agent := filepath.Join(config, "pi-agent")
		addPiWithAgentDir(t, bin, agent, filepath.Join(config, "keys")+"/../pi-agent")
		mine := filepath.Join(config, "bin", "claude")
		t.Cleanup(func() { os.RemoveAll(filepath.Dir(mine)) })
		if err := os.MkdirAll(filepath.Dir(mine), 0o700); err != nil {
			t.Fatal(err)
		}
		if b, err := os.ReadFile(cl); err != nil || os.WriteFile(mine, b, 0o700) != nil {
			t.Fatalf("copy the Claude binary: %v", err)
		}
		ours, _ := addClaude(t, bin, mine, "binincfg", fake.URL)
		if r := run(t, bin, "prompt", "--take", ours, "hello"); r.code != 0 {
			t.Errorf("a Claude binary kept under %s: exit %d, %q %q", config, r.code, r.stdout, r.stderr)
		}
		lateKeyOutOfReach(t, bin, cl, fake, filepath.Join(config, "keys"))
	})
	t.Run("its keys directory, beside an agent directory named through a link", func(t *testing.T) {
		home, _ := os.UserHomeDir()
		agent := filepath.Join(config, "pi-agent-linked")
		link := filepath.Join(home, "pi-agent-link-"+filepath.Base(t.TempDir()))
		if err := os.MkdirAll(agent, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(agent, link); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.Remove(link) })
		addPiWithAgentDir(t, bin, agent, link)
		lateKeyOutOfReach(t, bin, cl, fake, filepath.Join(config, "keys"))
	})
}

// addPiWithAgentDir registers a Pi conversation (never started) whose
// agent directory is agent, named as written, without an auth.json.
func addPiWithAgentDir(t *testing.T, bin, agent, written string) {
	t.Helper()
	t.Cleanup(func() { os.RemoveAll(agent) })
	pi, model, _ := sandboxtest.StubPiIn(t, stubmodel.Script{}, agent)
	// No auth.json there, as before Pi's first login.
	os.Remove(filepath.Join(agent, "auth.json"))
	proj, session := project(t, "piseat")
	id := strings.TrimSpace(mustRun(t, bin, "conv", "add", "--project", proj, "--seat", "piseat", "--session", session,
		"--engine", pi, "--provider", model.Provider, "--model", model.Model, "--agent-dir", written))
	t.Cleanup(func() { run(t, bin, "conv", "rm", id) })
}

// lateKeyOutOfReach launches a spy's engine, then puts a key in keys (a
// directory made now) for a conversation added now: the spy's tool must
// not read it, and the conversation must launch with it.
func lateKeyOutOfReach(t *testing.T, bin, cl string, fake *fakeanthropic.Server, keys string) {
	t.Helper()
	spy, _ := addClaude(t, bin, cl, "spy", fake.URL)
	if out := runTool(t, bin, spy, "ls -A "+filepath.Dir(keys)+"; echo launched", fake); !strings.Contains(out, "launched") {
		t.Fatalf("the spy's tool did not run:\n%s", out)
	}
	t.Cleanup(func() { os.RemoveAll(keys) })
	env := filepath.Join(keys, "claude.env")
	if err := os.MkdirAll(keys, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(env, []byte("ANTHROPIC_API_KEY=late-key-5353\nANTHROPIC_BASE_URL="+fake.URL+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	proj, _ := project(t, "late")
	late := strings.TrimSpace(mustRun(t, bin, "conv", "add", "--project", proj, "--seat", "late", "--engine-kind", "claude", "--engine", cl, "--env-file", env))
	mustRun(t, "systemctl", "--user", "start", "mosaic-conv@"+late+".socket")
	t.Cleanup(func() { endConversation(t, bin, late) })

	out := runTool(t, bin, spy, "cat "+env+" 2>&1; ls -A "+filepath.Dir(keys)+" | sed s/^/entry:/; echo done", fake)
	if !strings.Contains(out, "done") || strings.Contains(out, "late-key-5353") {
		t.Errorf("the engine launched before the key was added reached it:\n%s", out)
	}
	if r := run(t, bin, "prompt", "--take", late, "hello"); r.code != 0 {
		t.Errorf("the conversation whose key is in %s: exit %d, %q %q", keys, r.code, r.stdout, r.stderr)
	}
}

// TestPiAuthLinkIntoKeys: a tool of an engine launched before a Pi
// conversation was added (its agent directory then covered by no engine)
// plants auth.json there as a link to a Claude key kept in mosaic's keys
// directory. The controller reads the user's auth.json outside any
// engine: it refuses one that leads into what the engines mask, so the key
// is never copied into the Pi engine's own agent directory, and the launch
// says why.
func TestPiAuthLinkIntoKeys(t *testing.T) {
	bin, cl, fake := claudeSetup(t)
	env := keyFile(t, "victim-"+filepath.Base(t.TempDir())+".env", "ANTHROPIC_API_KEY=victim-key-7171\nANTHROPIC_BASE_URL="+fake.URL+"\n")
	vproj, _ := project(t, "victim")
	victim := strings.TrimSpace(mustRun(t, bin, "conv", "add", "--project", vproj, "--seat", "victim", "--engine-kind", "claude", "--engine", cl, "--env-file", env))
	t.Cleanup(func() { endConversation(t, bin, victim) })

	spy, _ := addClaude(t, bin, cl, "spy", fake.URL)
	home, _ := os.UserHomeDir()
	agent := filepath.Join(home, "pi-late-"+filepath.Base(t.TempDir()))
	t.Cleanup(func() { os.RemoveAll(agent) })
	out := runTool(t, bin, spy, "cat "+env+" 2>&1 | sed s/^/cat:/; mkdir -p "+agent+" && ln -s "+env+" "+agent+"/auth.json; echo planted=$?", fake)
	if strings.Contains(out, "victim-key-7171") || !strings.Contains(out, "planted=0") {
		t.Fatalf("the spy read the key, or did not plant its link:\n%s", out)
	}

	pi, model, _ := sandboxtest.StubPiIn(t, stubmodel.Script{Turns: []stubmodel.Turn{
		{Text: []string{"Looking."}, Tool: &stubmodel.ToolCall{Command: `cat "$PI_CODING_AGENT_DIR/auth.json" > seen.txt 2>&1`}},
		{Text: []string{"Looked."}},
	}}, agent)
	proj, session := project(t, "pilate")
	id := strings.TrimSpace(mustRun(t, bin, "conv", "add", "--project", proj, "--seat", "pilate", "--session", session,
		"--engine", pi, "--provider", model.Provider, "--model", model.Model, "--agent-dir", agent))
	mustRun(t, "systemctl", "--user", "start", "mosaic-conv@"+id+".socket")
	t.Cleanup(func() { endConversation(t, bin, id) })
	r := run(t, bin, "prompt", "--take", "--timeout", "2m", id, "look")
	t.Logf("the prompt: exit %d, %q %q", r.code, r.stdout, r.stderr)
	if r.code == 0 || !strings.Contains(r.stdout+r.stderr, filepath.Join(agent, "auth.json")) {
		t.Errorf("the prompt: exit %d, %q %q; want the launch refused, naming the agent directory's auth.json", r.code, r.stdout, r.stderr)
	}
	state, _ := xdg.StateHome()
	copyOf, _ := os.ReadFile(filepath.Join(state, "mosaic", "agent", id, "auth.json"))
	seen, _ := os.ReadFile(filepath.Join(proj, "seen.txt"))
	if strings.Contains(string(copyOf), "victim-key-7171") || strings.Contains(string(seen), "victim-key-7171") {
		t.Errorf("the Pi engine's own auth.json holds the Claude key kept in mosaic's keys: copy %q; its tool read %q", copyOf, seen)
	}
}

// TestClaudeEnvFileLinkedAway: an env file a tool replaced by a link (in
// an engine that did not cover it: one launched before its conversation
// was added) is neither masked nor bound where the link leads in the
// engines launched after: a link to the home would cover the whole home
// in every engine, a dangling one fail every launch. Nor can a tool swap
// the env file's directory for one of its own: the directory is pinned
// in place (scopes fixAncestors), so the next launch reads the user's.
func TestClaudeEnvFileLinkedAway(t *testing.T) {
	bin, cl, fake := claudeSetup(t)
	home, _ := os.UserHomeDir()
	dir, env, _ := victimBesideNotes(t, bin, cl, fake.URL)
	other, otherProj := addClaude(t, bin, cl, "other", fake.URL)

	// The directory beside the env file is pinned in the engine.
	if out := runTool(t, bin, other, "mv "+dir+" "+dir+".old 2>/dev/null; echo moved=$?", fake); !strings.Contains(out, "moved=1") {
		t.Errorf("the tool moved the env file's directory:\n%s", out)
	}
	if got, err := claude.LoadEnvFile(env); err != nil || got["ANTHROPIC_API_KEY"] != "victim-key-4242" {
		t.Errorf("the victim's env file reads %v, %v", got, err)
	}
	mustRun(t, bin, "stop", "--take", "--yes", other)

	// What a tool of an older engine does: a link to the home.
	if err := os.Remove(env); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(home, env); err != nil {
		t.Fatal(err)
	}
	mustRun(t, bin, "recover", "--take", other)
	if out := runTool(t, bin, other, "ls -A "+home+"; echo listed", fake); !strings.Contains(out, filepath.Base(otherProj)) {
		t.Errorf("the home is covered in an unrelated conversation's engine:\n%s", out)
	}
	mustRun(t, bin, "stop", "--take", "--yes", other)

	// A link that leads nowhere.
	if err := os.Remove(env); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(dir, "nowhere"), env); err != nil {
		t.Fatal(err)
	}
	mustRun(t, bin, "recover", "--take", other)
	if r := run(t, bin, "prompt", "--take", other, "hello"); r.code != 0 {
		t.Errorf("an unrelated conversation fails for the victim's env file: exit %d, %q %q", r.code, r.stdout, r.stderr)
	}
}

// readTranscripts concatenates the transcripts under dir, read as the
// test's user (outside any engine).
func readTranscripts(dir string) (string, error) {
	var b strings.Builder
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if errors.Is(err, fs.ErrNotExist) && p != dir {
			// A file the running engine removed between the listing and
			// its stat (Claude's .claude.json.lock): no transcript.
			return nil
		}
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".jsonl") {
			return err
		}
		raw, err := os.ReadFile(p)
		b.Write(raw)
		return err
	})
	return b.String(), err
}

// keyFile writes an env file named name, holding body, into mosaic's keys
// directory (made if missing), removed when the test ends.
func keyFile(t *testing.T, name, body string) string {
	t.Helper()
	config, err := conversations.ConfigDir()
	if err != nil {
		t.Fatal(err)
	}
	keys := filepath.Join(config, "keys")
	if err := os.MkdirAll(keys, 0o700); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(keys, name)
	t.Cleanup(func() { os.Remove(p) })
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestClaudeWithoutKeyFails: a Claude conversation whose env file names
// no key (README's empty 0600 file, not yet filled) has every prompt
// answered by the CLI's synthetic "Not logged in" message: `prompt` says
// the turn failed (exit 4, error) instead of exiting 0 with that message
// as the answer, and nothing reaches the model.
func TestClaudeWithoutKeyFails(t *testing.T) {
	sandboxtest.Require(t)
	bin := sandboxtest.Bin(t, "mosaicctl")
	cl := sandboxtest.Claude(t)
	fake := sandboxtest.FakeAnthropic(t)
	mustRun(t, bin, "install")
	t.Cleanup(func() { run(t, bin, "uninstall", "--force") })
	proj, _ := project(t, "nokey")
	env := writeEnvFile(t, "ANTHROPIC_BASE_URL="+fake.URL+"\n", 0o600)
	id := strings.TrimSpace(mustRun(t, bin, "conv", "add", "--project", proj, "--seat", "nokey", "--engine-kind", "claude", "--engine", cl, "--env-file", env))
	mustRun(t, "systemctl", "--user", "start", "mosaic-conv@"+id+".socket")
	t.Cleanup(func() { endConversation(t, bin, id) })
	res := run(t, bin, "prompt", "--take", "--timeout", "1m", id, "hello")
	if res.code != exitUnsettled || !strings.Contains(res.stderr, "error") || !strings.Contains(res.stdout, "Not logged in") {
		t.Fatalf("prompt without a key: exit %d, stdout %q, stderr %q; want exit %d, the CLI's message and an error", res.code, res.stdout, res.stderr, exitUnsettled)
	}
	if n := len(fake.Requests()); n != 0 {
		t.Fatalf("%d requests reached the model without a key", n)
	}
}
