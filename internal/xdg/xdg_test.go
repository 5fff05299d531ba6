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
