// Package units renders and installs the systemd user units that run one
// mosaic controller per conversation: mosaic-conv@.socket listens at
// %t/mosaic/conv/<id>.sock and socket-activates mosaic-conv@.service, which
// runs `mosaicctl serve --conversation <id>`.
//
// The unit text is embedded; the only thing rendered into it is the
// absolute path of the installed binary, so `systemd-analyze --user verify`
// sees exactly the files that run.
package units

import (
	"bytes"
	"embed"
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"
	"text/template"

	"golang.org/x/sys/unix"

	"github.com/mosaic-agents/mosaic/internal/xdg"
)

//go:embed templates
var templates embed.FS

// Names are the unit files this package writes, in install order.
var Names = []string{"mosaic-conv@.socket", "mosaic-conv@.service", WebSocketUnit, WebServiceUnit}

// The web surface's units: one socket for every conversation's browser
// views, activating one server (docs/web.md).
const (
	WebSocketUnit  = "mosaic-web.socket"
	WebServiceUnit = "mosaic-web.service"
)

// Marker starts every file this package writes. A file without it was not
// written by mosaic and is never overwritten or removed without --force.
const Marker = "# mosaic-managed:"

// File is one rendered unit file.
type File struct {
	Name string
	Data []byte
}

// Render returns the unit files for the binary at bin (absolute), as this
// machine runs them.
func Render(bin string) ([]File, error) { return render(bin, hasIPv6()) }

// RenderPackaged returns them for a package built on another machine: as
// for one with IPv6, as nearly every machine is (a kernel booted with
// ipv6.disable=1 then needs the web socket's [::1] line dropped with
// `systemctl --user edit mosaic-web.socket`, and doctor calls the unit
// outdated).
func RenderPackaged(bin string) ([]File, error) { return render(bin, true) }

func render(bin string, loopback6 bool) ([]File, error) {
	exec, err := execPath(bin)
	if err != nil {
		return nil, err
	}
	data := struct {
		ExecStart string
		Loopback6 bool
	}{ExecStart: exec, Loopback6: loopback6}
	var out []File
	for _, name := range Names {
		text, err := fs.ReadFile(templates, "templates/"+name)
		if err != nil {
			return nil, fmt.Errorf("read template %s: %w", name, err)
		}
		tmpl, err := template.New(name).Option("missingkey=error").Parse(string(text))
		if err != nil {
			return nil, fmt.Errorf("parse template %s: %w", name, err)
		}
		var buf bytes.Buffer
		if err := tmpl.Execute(&buf, data); err != nil {
			return nil, fmt.Errorf("render %s: %w", name, err)
		}
		out = append(out, File{Name: name, Data: buf.Bytes()})
	}
	return out, nil
}

// hasIPv6 says whether this kernel makes IPv6 sockets: where it does not
// (booted with ipv6.disable=1), a ListenStream=[::1] would fail the whole
// socket unit, and no process can listen there either.
func hasIPv6() bool {
	fd, err := unix.Socket(unix.AF_INET6, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return false
	}
	unix.Close(fd)
	return true
}

// execPath quotes bin for ExecStart=: systemd treats % as a specifier and
// splits on spaces, and a newline or quote would end or break the line.
func execPath(bin string) (string, error) {
	if !filepath.IsAbs(bin) {
		return "", fmt.Errorf("binary path %q is not absolute", bin)
	}
	if strings.ContainsAny(bin, "\n\r\"'\\") {
		return "", fmt.Errorf("binary path %q holds a newline, quote or backslash; install mosaicctl under a plain path", bin)
	}
	bin = strings.ReplaceAll(bin, "%", "%%")
	if strings.ContainsAny(bin, " \t") {
		return `"` + bin + `"`, nil
	}
	return bin, nil
}

// IsOurs reports whether data is a unit file written by this package.
func IsOurs(data []byte) bool { return bytes.HasPrefix(data, []byte(Marker)) }

// SocketPath returns where mosaic-conv@<id>.socket listens for the calling
// user: ListenStream=%t/mosaic/conv/%i.sock, %t being $XDG_RUNTIME_DIR.
func SocketPath(id string) (string, error) {
	rt, err := xdg.RuntimeDir()
	if err != nil {
		return "", fmt.Errorf("%w: the conversation sockets live under the user's runtime directory (log in through PAM/systemd-logind, or export XDG_RUNTIME_DIR=/run/user/$(id -u))", err)
	}
	return filepath.Join(rt, "mosaic", "conv", id+".sock"), nil
}
