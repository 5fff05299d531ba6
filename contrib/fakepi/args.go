package fakepi

import (
	"fmt"
	"path/filepath"
)

// Args are the sealed command line the fake accepts, the same allow-list
// the controller may pass to the real Pi.
type Args struct {
	Session  string
	Provider string
	Model    string
	Thinking string
}

// sealFlags must all be present; they take no value.
var sealFlags = []string{"--no-extensions", "--no-prompt-templates", "--no-themes", "--no-skills", "--no-context-files"}

// ParseArgs accepts exactly `--mode rpc`, the five --no-* flags, `--session
// <absolute path>` and at most one each of --provider, --model, --thinking.
// Anything else is refused: a fake that tolerated an unsealed argv would
// hide a controller bug that the real Pi would act on.
func ParseArgs(argv []string) (Args, error) {
	var a Args
	seen := map[string]bool{}
	mode := ""
	for i := 0; i < len(argv); i++ {
		f := argv[i]
		if seen[f] {
			return a, fmt.Errorf("flag %s given twice", f)
		}
		seen[f] = true
		switch f {
		case "--no-extensions", "--no-prompt-templates", "--no-themes", "--no-skills", "--no-context-files":
			continue
		case "--mode", "--session", "--provider", "--model", "--thinking":
		default:
			return a, fmt.Errorf("unsealed argument %q", f)
		}
		if i+1 >= len(argv) {
			return a, fmt.Errorf("flag %s needs a value", f)
		}
		i++
		v := argv[i]
		switch f {
		case "--mode":
			mode = v
		case "--session":
			a.Session = v
		case "--provider":
			a.Provider = v
		case "--model":
			a.Model = v
		case "--thinking":
			a.Thinking = v
		}
	}
	if mode != "rpc" {
		return a, fmt.Errorf("--mode rpc is required (got %q)", mode)
	}
	for _, f := range sealFlags {
		if !seen[f] {
			return a, fmt.Errorf("seal flag %s is missing", f)
		}
	}
	if a.Session == "" || !filepath.IsAbs(a.Session) {
		return a, fmt.Errorf("--session needs an absolute path (got %q)", a.Session)
	}
	return a, nil
}
