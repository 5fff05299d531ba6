package units

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestRender(t *testing.T) {
	files, err := Render("/opt/mosaic/bin/mosaicctl")
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != 4 || files[0].Name != "mosaic-conv@.socket" || files[1].Name != "mosaic-conv@.service" ||
		files[2].Name != "mosaic-web.socket" || files[3].Name != "mosaic-web.service" {
		t.Fatalf("files %v", files)
	}
	want := map[string][]string{
		"mosaic-conv@.socket": {"ListenStream=%t/mosaic/conv/%i.sock", "SocketMode=0600", "DirectoryMode=0700",
			"Accept=no", "FileDescriptorName=control", "RemoveOnStop=yes"},
		"mosaic-conv@.service": {"Type=notify", "NotifyAccess=main", "ExecStart=/opt/mosaic/bin/mosaicctl serve --conversation %i",
			"Requires=mosaic-conv@%i.socket", "After=mosaic-conv@%i.socket", "Restart=on-failure", "NoNewPrivileges=yes",
			"SyslogLevel=warning", "SyslogLevelPrefix=no", "LogRateLimitIntervalSec=30s", "LogRateLimitBurst=10000"},
		"mosaic-web.socket": {"ListenStream=127.0.0.1:7433", "ListenStream=%t/mosaic/web.sock", "SocketMode=0600",
			"DirectoryMode=0700", "Accept=no", "FileDescriptorName=web"},
		"mosaic-web.service": {"ExecStart=/opt/mosaic/bin/mosaicctl web serve --idle 10m", "Requires=mosaic-web.socket",
			"Type=notify", "UMask=0077", "NoNewPrivileges=yes"},
	}
	if hasIPv6() {
		// localhost's first address held too, so no other process can.
		want["mosaic-web.socket"] = append(want["mosaic-web.socket"], "ListenStream=[::1]:7433", "FreeBind=yes")
	}
	for _, f := range files {
		if !IsOurs(f.Data) {
			t.Errorf("%s lacks the marker", f.Name)
		}
		lines := strings.Split(string(f.Data), "\n")
		for _, w := range want[f.Name] {
			found := false
			for _, l := range lines {
				if l == w {
					found = true
				}
			}
			if !found {
				t.Errorf("%s lacks the line %q", f.Name, w)
			}
		}
	}
}

func TestExecPath(t *testing.T) {
	tests := []struct{ in, want, err string }{
		{"/usr/bin/mosaicctl", "/usr/bin/mosaicctl", ""},
		{"/opt/my tools/mosaicctl", `"/opt/my tools/mosaicctl"`, ""},
		{"/opt/100%/mosaicctl", "/opt/100%%/mosaicctl", ""},
		{"bin/mosaicctl", "", "not absolute"},
		{"/opt/a\nb", "", "newline"},
		{`/opt/a"b`, "", "quote"},
	}
	for _, tt := range tests {
		got, err := execPath(tt.in)
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("execPath(%q) err %v, want one naming %q", tt.in, err, tt.err)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("execPath(%q) = %q, %v; want %q", tt.in, got, err, tt.want)
		}
	}
}

func actions(changes []Change) string {
	var a []string
	for _, c := range changes {
		a = append(a, c.Action)
	}
	return strings.Join(a, ",")
}

func TestInstallLifecycle(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "systemd", "user")
	v1, _ := Render("/usr/bin/mosaicctl")
	v2, _ := Render("/usr/local/bin/mosaicctl")

	steps := []struct {
		name  string
		files []File
		force bool
		setup func(t *testing.T)
		want  string
		err   error
	}{
		{name: "fresh", files: v1, want: "written,written,written,written"},
		{name: "again changes nothing", files: v1, want: "unchanged,unchanged,unchanged,unchanged"},
		{name: "a new binary rewrites ours", files: v2, want: "unchanged,rewritten,unchanged,rewritten"},
		{name: "a foreign file is refused", files: v1, setup: func(t *testing.T) {
			if err := os.WriteFile(filepath.Join(dir, "mosaic-conv@.service"), []byte("[Service]\nExecStart=/bin/true\n"), 0o644); err != nil {
				t.Fatal(err)
			}
		}, err: ErrForeign},
		{name: "force overwrites it", files: v1, force: true, want: "unchanged,rewritten,unchanged,rewritten"},
	}
	for _, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			if st.setup != nil {
				st.setup(t)
			}
			var before []byte
			if st.err != nil {
				before, _ = os.ReadFile(filepath.Join(dir, "mosaic-conv@.socket"))
			}
			changes, err := Install(dir, st.files, st.force)
			if st.err != nil {
				if !errors.Is(err, st.err) {
					t.Fatalf("err %v, want %v", err, st.err)
				}
				after, _ := os.ReadFile(filepath.Join(dir, "mosaic-conv@.socket"))
				if string(after) != string(before) {
					t.Fatal("a refused install changed another file")
				}
				return
			}
			if err != nil || actions(changes) != st.want {
				t.Fatalf("Install = %s, %v; want %s", actions(changes), err, st.want)
			}
			for _, f := range st.files {
				got, _ := os.ReadFile(filepath.Join(dir, f.Name))
				if string(got) != string(f.Data) {
					t.Fatalf("%s not as rendered", f.Name)
				}
			}
		})
	}
	left, _ := filepath.Glob(filepath.Join(dir, ".*tmp*"))
	if len(left) != 0 {
		t.Fatalf("temporary files left behind: %v", left)
	}
}

func TestUninstall(t *testing.T) {
	dir := t.TempDir()
	files, _ := Render("/usr/bin/mosaicctl")
	if _, err := Install(dir, files, false); err != nil {
		t.Fatal(err)
	}
	foreign := filepath.Join(dir, "mosaic-conv@.socket")
	os.WriteFile(foreign, []byte("[Socket]\n"), 0o644)
	if _, err := Uninstall(dir, false); !errors.Is(err, ErrForeign) {
		t.Fatalf("uninstall over a foreign file: %v, want ErrForeign", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "mosaic-conv@.service")); err != nil {
		t.Fatal("a refused uninstall removed a file")
	}
	os.Remove(foreign)
	changes, err := Uninstall(dir, false)
	if err != nil || actions(changes) != "absent,removed,removed,removed" {
		t.Fatalf("Uninstall = %s, %v", actions(changes), err)
	}
	changes, err = Uninstall(dir, false)
	if err != nil || actions(changes) != "absent,absent,absent,absent" {
		t.Fatalf("second Uninstall = %s, %v", actions(changes), err)
	}
}

// TestCheckBinary: a go-build temporary is refused, a binary inside a
// checkout warns, an installed one is quiet.
func TestCheckBinary(t *testing.T) {
	root := t.TempDir()
	clone := filepath.Join(root, "src", "mosaic")
	for _, d := range []string{filepath.Join(clone, ".git"), filepath.Join(clone, ".build", "bin"), filepath.Join(root, "prefix", "bin")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(clone, "go.mod"), []byte("module x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ path, warn, err string }{
		{filepath.Join(root, "prefix", "bin", "mosaicctl"), "", ""},
		{filepath.Join(clone, ".build", "bin", "mosaicctl"), "inside the source checkout " + clone, ""},
		{filepath.Join(clone, "mosaicctl"), "make install PREFIX=~/.local", ""},
		{"/tmp/go-build1234/b001/exe/mosaicctl", "", "temporary build"},
		{filepath.Join(root, ".cache", "go-build", "ab", "mosaicctl"), "", "temporary build"},
	} {
		warn, err := CheckBinary(tc.path)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("CheckBinary(%s) = %q, %v; want the error %q", tc.path, warn, err, tc.err)
			}
			continue
		}
		if err != nil || (tc.warn == "") != (warn == "") || !strings.Contains(warn, tc.warn) {
			t.Errorf("CheckBinary(%s) = %q, %v; want a warning with %q", tc.path, warn, err, tc.warn)
		}
	}
}
