package devices

import (
	"errors"
	"slices"
	"testing"
)

// TestCheck: a device must be a clean path below /dev, not where the
// engine's own ptys, shared memory or queues go, at most Max of them; a
// plain one or a repeat is dropped.
func TestCheck(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   []string
		want []string
		bad  bool
	}{
		{name: "kept in order, plain and repeats dropped", in: []string{"/dev/kvm", "/dev/dri/renderD128", "/dev/kvm", "/dev/null"}, want: []string{"/dev/kvm", "/dev/dri/renderD128"}},
		{name: "none", in: nil, want: nil},
		{name: "outside /dev", in: []string{"/etc/passwd"}, bad: true},
		{name: "relative", in: []string{"dev/kvm"}, bad: true},
		{name: "not clean", in: []string{"/dev/../etc/passwd"}, bad: true},
		{name: "/dev itself", in: []string{"/dev/"}, bad: true},
		{name: "a pty", in: []string{"/dev/pts/0"}, bad: true},
		{name: "the pty multiplexer (the engine's own is a link to its ptys')", in: []string{"/dev/ptmx"}, bad: true},
		{name: "shared memory", in: []string{"/dev/shm"}, bad: true},
		{name: "a queue", in: []string{"/dev/mqueue/q"}, bad: true},
		{name: "a name beside a reserved one", in: []string{"/dev/shmem"}, want: []string{"/dev/shmem"}},
		{name: "too many", in: slices.Repeat([]string{"/dev/kvm"}, Max+1), bad: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Check(tc.in)
			if tc.bad {
				if !errors.Is(err, ErrRefused) {
					t.Fatalf("Check(%q) = %q, %v; want ErrRefused", tc.in, got, err)
				}
				return
			}
			if err != nil || !slices.Equal(got, tc.want) {
				t.Fatalf("Check(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
			}
		})
	}
}
