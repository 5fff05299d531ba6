package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestGenManPages: a page per visible command and the units page, each
// naming every flag of its command, none for the hidden gen.
func TestGenManPages(t *testing.T) {
	app := newApp()
	pages := map[string]string{}
	for _, f := range manPages(app) {
		pages[f.Name] = string(f.Data)
	}
	for _, name := range []string{"mosaicctl.1", "mosaic-conv@.service.5"} {
		if !strings.HasPrefix(pages[name], ".TH ") {
			t.Errorf("%s: missing or without .TH", name)
		}
	}
	if _, ok := pages["mosaicctl-gen.1"]; ok {
		t.Error("the hidden gen command has a page")
	}
	for _, c := range visible(app.Commands) {
		text := pages["mosaicctl-"+c.Name+".1"]
		if text == "" {
			t.Errorf("no page mosaicctl-%s.1", c.Name)
			continue
		}
		if !strings.Contains(pages["mosaicctl.1"], `\fB`+roff(c.Name)+`\fR`) {
			t.Errorf("mosaicctl.1 does not list %s", c.Name)
		}
		flags := flagDocs(c.Flags)
		for _, s := range visible(c.Subcommands) {
			if !strings.Contains(text, ".SH "+roff(strings.ToUpper(c.Name+" "+s.Name))) {
				t.Errorf("the page of %s lacks its subcommand %s", c.Name, s.Name)
			}
			flags = append(flags, flagDocs(s.Flags)...)
		}
		for _, f := range flags {
			if !strings.Contains(text, roff("--"+f.names[0])) {
				t.Errorf("the page of %s lacks --%s", c.Name, f.names[0])
			}
		}
	}
	for name, p := range pages {
		for i, line := range strings.Split(p, "\n") {
			if strings.HasPrefix(line, "'") {
				t.Errorf("%s:%d starts with a quote (a roff control line): %q", name, i+1, line)
			}
		}
	}
}

func TestPlaceholder(t *testing.T) {
	for _, tc := range []struct{ usage, name, text string }{
		{"install into `DIR` instead", "DIR", "install into DIR instead"},
		{"no placeholder", "", "no placeholder"},
		{"one `quote only", "", "one `quote only"},
	} {
		t.Run(tc.usage, func(t *testing.T) {
			name, text := placeholder(tc.usage)
			if name != tc.name || text != tc.text {
				t.Errorf("placeholder(%q) = %q, %q; want %q, %q", tc.usage, name, text, tc.name, tc.text)
			}
		})
	}
}

// TestGenCompletion runs each shell's script against a fake mosaicctl
// whose `conv list` prints two conversations: it completes subcommands,
// flags, ids where the command takes one, and after a value flag a file,
// never an id. The installed scripts are tested the same way in
// packaging/test against the real `conv list`.
func TestGenCompletion(t *testing.T) {
	dir := t.TempDir()
	fake := "#!/bin/sh\n[ \"$1 $2\" = \"conv list\" ] && printf 'ID  SEAT\\npi-0123456789abcdef0123  a\\npi-aaaaaaaaaaaaaaaaaaaa  b\\n'\n"
	if err := os.WriteFile(filepath.Join(dir, "mosaicctl"), []byte(fake), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "pi-file"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	// Each shell completes the last word of words (the empty string: a new word).
	runners := map[string]func(script string, words []string) string{
		"bash": func(script string, words []string) string {
			return `source ` + script + `; COMP_WORDS=(` + shq(words) + `); COMP_CWORD=` + itoa(len(words)-1) + `; _mosaicctl; printf '%s\n' "${COMPREPLY[@]}"`
		},
		"zsh": func(script string, words []string) string {
			// compadd keeps the words the current word prefixes, as zsh's does.
			return `fpath=(` + filepath.Dir(script) + ` $fpath); autoload -U _mosaicctl
compadd() { [[ $1 == -- ]] && shift; print -l -- ${(M)@:#${words[CURRENT]}*}; }; _files() { print FILES; }
words=(` + shq(words) + `); CURRENT=` + itoa(len(words)) + `; _mosaicctl`
		},
		"fish": func(script string, words []string) string {
			return `source ` + script + `; complete -C` + shq([]string{strings.Join(words, " ")}) + ` | cut -f1`
		},
	}
	for _, shell := range []string{"bash", "zsh", "fish"} {
		t.Run(shell, func(t *testing.T) {
			bin, err := exec.LookPath(shell)
			if err != nil {
				if os.Getenv("CI") == "true" {
					t.Fatalf("%s is not installed (.ci/run installs it)", shell)
				}
				t.Skipf("%s is not installed", shell)
			}
			script, err := completion(newApp(), shell)
			if err != nil {
				t.Fatal(err)
			}
			name := map[string]string{"bash": "mosaicctl.bash", "zsh": "_mosaicctl", "fish": "mosaicctl.fish"}[shell]
			sdir := t.TempDir()
			path := filepath.Join(sdir, name)
			if err := os.WriteFile(path, []byte(script), 0o644); err != nil {
				t.Fatal(err)
			}
			for _, tc := range []struct {
				words      []string
				want, deny string
				only       string // the one shell that splits words so
			}{
				{[]string{"mosaicctl", "stop", "--timeout", "=", "1m", "pi-0"}, "pi-0123456789abcdef0123", "pi-aaaa", "bash"},
				{[]string{"mosaicctl", "stop", "--take", "=", "true", "pi-0"}, "pi-0123456789abcdef0123", "pi-aaaa", "bash"},
				{[]string{"mosaicctl", "sto"}, "stop", "gen", ""},
				{[]string{"mosaicctl", "g"}, "", "gen", ""},
				{[]string{"mosaicctl", "stop", "--timeout", "1m", "pi-0"}, "pi-0123456789abcdef0123", "pi-aaaa", ""},
				{[]string{"mosaicctl", "conv", "rm", "pi-"}, "pi-aaaaaaaaaaaaaaaaaaaa", "", ""},
				{[]string{"mosaicctl", "conv", "add", "--pro"}, "--project", "--proof", ""},
				{[]string{"mosaicctl", "stop", "--proof", "pi-"}, "", "pi-0123456789abcdef0123", ""},
				{[]string{"mosaicctl", "stop", "pi-0123456789abcdef0123", "pi-"}, "", "pi-aaaa", ""},
				{[]string{"mosaicctl", "queue", "c"}, "cancel", "pi-", ""},
				{[]string{"mosaicctl", "queue", ""}, "resume", "", ""},
				{[]string{"mosaicctl", "queue", "pi-0"}, "pi-0123456789abcdef0123", "pi-aaaa", ""},
				{[]string{"mosaicctl", "queue", "cancel", "pi-"}, "pi-aaaaaaaaaaaaaaaaaaaa", "pi-file", ""},
				{[]string{"mosaicctl", "queue", "resume", "--take", "pi-a"}, "pi-aaaaaaaaaaaaaaaaaaaa", "pi-file", ""},
				{[]string{"mosaicctl", "queue", "edit", "--timeout", "1m", "pi-0"}, "pi-0123456789abcdef0123", "", ""},
				// Values and arguments: a flag's few words, files only
				// where a FILE or a DIR goes, nothing for the rest.
				{[]string{"mosaicctl", "conv", "add", "--thinking", ""}, "medium", files, ""},
				{[]string{"mosaicctl", "conv", "add", "--thinking", "x"}, "xhigh", "low", ""},
				{[]string{"mosaicctl", "conv", "add", "--engine-kind", ""}, "claude", files, ""},
				{[]string{"mosaicctl", "conv", "add", "--session", ""}, files, "", ""},
				{[]string{"mosaicctl", "stop", "--timeout", ""}, "", files, ""},
				{[]string{"mosaicctl", "stop", "pi-0123456789abcdef0123", ""}, "", files, ""},
				{[]string{"mosaicctl", "proof", "verify", ""}, files, "", ""},
				{[]string{"mosaicctl", "help", ""}, "stop", files, ""},
				{[]string{"mosaicctl", "he"}, "help", "", ""},
			} {
				if tc.only != "" && tc.only != shell {
					continue
				}
				cmd := exec.Command(bin, "-c", runners[shell](path, tc.words))
				if shell == "zsh" {
					cmd = exec.Command(bin, "-fc", runners[shell](path, tc.words))
				}
				cmd.Dir = dir
				cmd.Env = append(os.Environ(), "PATH="+dir+":"+os.Getenv("PATH"), "HOME="+t.TempDir())
				out, err := cmd.CombinedOutput()
				if err != nil {
					t.Fatalf("%s %q: %v\n%s", shell, tc.words, err, out)
				}
				got := strings.Fields(string(out))
				// zsh's _files (a stub here) stands for the file names.
				fileWord := map[bool]string{true: "FILES", false: "pi-file"}[shell == "zsh"]
				if tc.want == files {
					tc.want = fileWord
				}
				if tc.deny == files {
					tc.deny = fileWord
				}
				if tc.want != "" && !contains(got, tc.want) {
					t.Errorf("%s completes %q to %q; want %s among them", shell, tc.words, got, tc.want)
				}
				if tc.deny != "" && containsPrefix(got, tc.deny) {
					t.Errorf("%s completes %q to %q; want no %s", shell, tc.words, got, tc.deny)
				}
			}
		})
	}
}

// files, as a completion case's want or deny, is the file names.
const files = "@files"

func shq(words []string) string {
	var q []string
	for _, w := range words {
		q = append(q, "'"+strings.ReplaceAll(w, "'", `'\''`)+"'")
	}
	return strings.Join(q, " ")
}

func itoa(i int) string { return strconv.Itoa(i) }

func contains(list []string, s string) bool {
	for _, l := range list {
		if l == s {
			return true
		}
	}
	return false
}

func containsPrefix(list []string, p string) bool {
	for _, l := range list {
		if strings.HasPrefix(l, p) {
			return true
		}
	}
	return false
}

// TestGenCompletionBashFileNames: where bash completes a file name, a name
// with a space is one candidate (not two words), and the completion says
// it offers file names (compopt -o filenames), so readline quotes it and
// ends a directory in a slash, not a space: `--session ~/src/app/.pi/…`
// completes level by level.
func TestGenCompletionBashFileNames(t *testing.T) {
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("bash is not installed")
	}
	script, err := completion(newApp(), "bash")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "mosaicctl.bash")
	if err := os.WriteFile(path, []byte(script), 0o644); err != nil {
		t.Fatal(err)
	}
	work := t.TempDir()
	if err := os.Mkdir(filepath.Join(work, "my proofs"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, words := range [][]string{
		{"mosaicctl", "stop", "--proof", "my"},
		{"mosaicctl", "proof", "verify", "my"},
		{"mosaicctl", "conv", "add", "--session", "m"},
	} {
		// compopt is stubbed: outside readline the builtin only fails.
		cmd := exec.Command(bash, "-c", `compopt() { printf 'compopt %s\n' "$*"; }; source `+path+
			`; COMP_WORDS=(`+shq(words)+`); COMP_CWORD=`+itoa(len(words)-1)+`; _mosaicctl; printf '<%s>\n' "${COMPREPLY[@]}"`)
		cmd.Dir = work
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%q: %v\n%s", words, err, out)
		}
		if got := string(out); got != "compopt -o filenames\n<my proofs>\n" {
			t.Errorf("bash completes %q to\n%s\nwant compopt -o filenames and the one candidate <my proofs>", words, got)
		}
	}
}
