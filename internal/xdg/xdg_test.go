package xdg

import (
	"errors"
	"path/filepath"
	"testing"
)

func TestHomes(t *testing.T) {
	t.Setenv("HOME", "/home/u")
	for _, tc := range []struct {
		name, env, value, want string
		get                    func() (string, error)
	}{
		{"config set", "XDG_CONFIG_HOME", "/c", "/c", ConfigHome},
		{"config unset", "XDG_CONFIG_HOME", "", "/home/u/.config", ConfigHome},
		{"config relative", "XDG_CONFIG_HOME", "c", "/home/u/.config", ConfigHome},
		{"state set", "XDG_STATE_HOME", "/s", "/s", StateHome},
		{"state unset", "XDG_STATE_HOME", "", "/home/u/.local/state", StateHome},
		{"state relative", "XDG_STATE_HOME", "s", "/home/u/.local/state", StateHome},
		{"runtime set", "XDG_RUNTIME_DIR", "/run/user/7", "/run/user/7", RuntimeDir},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv(tc.env, tc.value)
			if got, err := tc.get(); err != nil || got != filepath.Clean(tc.want) {
				t.Fatalf("got %q, %v; want %q", got, err, tc.want)
			}
		})
	}
	for _, v := range []string{"", "run/user/7"} {
		t.Setenv("XDG_RUNTIME_DIR", v)
		if d, err := RuntimeDir(); !errors.Is(err, ErrNoRuntimeDir) {
			t.Errorf("RuntimeDir with XDG_RUNTIME_DIR=%q = %q, %v; want ErrNoRuntimeDir", v, d, err)
		}
	}
}

// TestBaseIn: a base directory resolves under another environment (the
// user manager's) by the same rules as under this process's.
func TestBaseIn(t *testing.T) {
	for _, tc := range []struct {
		name string
		base Base
		env  map[string]string
		want string // "" means an error
	}{
		{"config set", Config, map[string]string{"HOME": "/home/u", "XDG_CONFIG_HOME": "/c/"}, "/c"},
		{"config unset", Config, map[string]string{"HOME": "/home/u"}, "/home/u/.config"},
		{"config relative", Config, map[string]string{"HOME": "/home/u", "XDG_CONFIG_HOME": "c"}, "/home/u/.config"},
		{"state unset", State, map[string]string{"HOME": "/home/u"}, "/home/u/.local/state"},
		{"state set", State, map[string]string{"HOME": "/home/u", "XDG_STATE_HOME": "/s"}, "/s"},
		{"no home", Config, map[string]string{}, ""},
		{"relative home", State, map[string]string{"HOME": "home"}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.base.In(func(k string) string { return tc.env[k] })
			if tc.want == "" {
				if err == nil {
					t.Fatalf("got %q, want an error", got)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("got %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}
