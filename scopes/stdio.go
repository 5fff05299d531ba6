package scopes

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// stdio makes the engine's stdin, stdout and stderr; the child ends are
// closed by closeChild.
//
// Each is a connected pair of Unix stream sockets, not a pipe. A tool
// runs as the engine's child, as the same user and in its namespaces, so
// it can name the engine's descriptors under /proc/<engine>/fd, and
// open(2) there reopens a pipe: a tool could write commands into the
// engine's stdin (a prompt, the answer to a dialog) and read or forge the
// engine's output and stderr before the controller sees them. A socket
// cannot be reopened through /proc (ENXIO), and pidfd_getfd or ptrace of
// the engine need PTRACE_MODE_ATTACH, which Yama (ptrace_scope ≥ 1)
// refuses to a descendant. Each pair is made one-way, like a pipe, by
// shutting the controller's end in the direction it does not use.
type stdio struct {
	inR, inW, outR, outW, errR, errW *os.File
}

func newStdio(stderr *os.File) (*stdio, error) {
	s := &stdio{}
	var err error
	if s.inR, s.inW, err = oneWay("stdin", false); err != nil {
		return nil, err
	}
	if s.outW, s.outR, err = oneWay("stdout", true); err != nil {
		s.closeAll()
		return nil, err
	}
	if stderr != nil {
		s.errW = stderr
	} else if s.errW, s.errR, err = oneWay("stderr", true); err != nil {
		s.closeAll()
		return nil, err
	}
	return s, nil
}

// oneWay returns the engine's end (blocking, as a child expects its
// stdio) and the controller's (non-blocking, so it is pollable like a
// pipe from os.Pipe: deadlines work and Close ends a blocked read) of a
// socket pair that carries bytes one way only: from the engine when
// fromEngine, else to it.
func oneWay(name string, fromEngine bool) (engine, ours *os.File, err error) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, nil, fmt.Errorf("engine %s socket pair: %w", name, err)
	}
	how := unix.SHUT_RD // we write to the engine: nothing comes back
	if fromEngine {
		how = unix.SHUT_WR // we read from the engine: nothing goes to it
	}
	if err := unix.Shutdown(fds[1], how); err != nil {
		unix.Close(fds[0])
		unix.Close(fds[1])
		return nil, nil, fmt.Errorf("engine %s socket pair: shutdown: %w", name, err)
	}
	if err := unix.SetNonblock(fds[1], true); err != nil {
		unix.Close(fds[0])
		unix.Close(fds[1])
		return nil, nil, fmt.Errorf("engine %s socket pair: %w", name, err)
	}
	return os.NewFile(uintptr(fds[0]), "|"+name), os.NewFile(uintptr(fds[1]), "|"+name), nil
}

func (s *stdio) closeChild() {
	s.inR.Close()
	s.outW.Close()
	if s.errR != nil {
		s.errW.Close()
	}
}

func (s *stdio) closeAll() {
	for _, f := range []*os.File{s.inR, s.inW, s.outR, s.outW, s.errR} {
		if f != nil {
			f.Close()
		}
	}
	if s.errR != nil && s.errW != nil {
		s.errW.Close()
	}
}
