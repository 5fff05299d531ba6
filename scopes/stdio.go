package scopes

import "os"

// stdio makes the engine's pipes; the child ends are closed by closeChild.
type stdio struct {
	inR, inW, outR, outW, errR, errW *os.File
}

func newStdio(stderr *os.File) (*stdio, error) {
	s := &stdio{}
	var err error
	if s.inR, s.inW, err = os.Pipe(); err != nil {
		return nil, err
	}
	if s.outR, s.outW, err = os.Pipe(); err != nil {
		s.closeAll()
		return nil, err
	}
	if stderr != nil {
		s.errW = stderr
	} else if s.errR, s.errW, err = os.Pipe(); err != nil {
		s.closeAll()
		return nil, err
	}
	return s, nil
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
