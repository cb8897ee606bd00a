//go:build !linux

package h1server

import "errors"

// watcher is Linux's only: elsewhere a request learns of its client's
// leaving when it writes to it.
type watcher struct{}

func newWatcher(*Server) (*watcher, error) {
	return nil, errors.New("no epoll on this system")
}

func (*watcher) add(*conn) bool { return false }
func (*watcher) remove(*conn)   {}
func (*watcher) close()         {}

func (*watcher) ended() <-chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}
