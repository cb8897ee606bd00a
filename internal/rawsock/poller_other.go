//go:build !linux

package rawsock

import "errors"

// Poller is available on Linux only.
type Poller struct{}

// NewPoller reports that there is no poller on this system.
func NewPoller() (*Poller, error) {
	return nil, errors.New("rawsock: no poller on this system")
}

func (p *Poller) Add(int) error { return errors.New("rawsock: no poller on this system") }
func (p *Poller) Remove(int)    {}
func (p *Poller) Wait(int) ([]int, error) {
	return nil, errors.New("rawsock: no poller on this system")
}
func (p *Poller) Wake()        {}
func (p *Poller) Close() error { return nil }
