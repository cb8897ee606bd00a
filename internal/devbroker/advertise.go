package devbroker

import (
	"fmt"
	"net"
	"strconv"
)

// kfake tells clients the address its listener reports, so a broker is
// made to advertise another address (Options.Advertise) by listening
// through a net.Listener whose Addr reports that address. Broker i listens
// on listenPort+i and advertises advertisePort+i.

// parseAdvertise checks Options.Advertise against the brokers to run and
// returns its host and first port.
func parseAdvertise(advertise string, listenPort, brokers int) (string, int, error) {
	host, portS, err := net.SplitHostPort(advertise)
	if err != nil {
		return "", 0, fmt.Errorf("devbroker: advertised address %q: %w (want host:port)", advertise, err)
	}
	if host == "" {
		return "", 0, fmt.Errorf("devbroker: advertised address %q: the host is missing (want host:port)", advertise)
	}
	port, err := strconv.Atoi(portS)
	if err != nil || port <= 0 || port+brokers-1 > 65535 {
		return "", 0, fmt.Errorf("devbroker: advertised address %q: the port must be 1-%d for %d brokers", advertise, 65535-brokers+1, brokers)
	}
	if listenPort == 0 {
		return "", 0, fmt.Errorf("devbroker: an advertised address needs a fixed listen port, not 0: broker i advertises its port+i")
	}
	return host, port, nil
}

// advertisingListen is a kfake ListenFn: it listens where kfake asks and
// reports the advertised address of the same broker.
func advertisingListen(host string, listenPort, advertisePort int) func(network, address string) (net.Listener, error) {
	return func(network, address string) (net.Listener, error) {
		ln, err := net.Listen(network, address)
		if err != nil {
			return nil, err
		}
		port := ln.Addr().(*net.TCPAddr).Port
		return advertisedListener{ln, advertisedAddr(net.JoinHostPort(host, strconv.Itoa(port-listenPort+advertisePort)))}, nil
	}
}

type advertisedListener struct {
	net.Listener
	addr advertisedAddr
}

func (l advertisedListener) Addr() net.Addr { return l.addr }

type advertisedAddr string

func (a advertisedAddr) Network() string { return "tcp" }
func (a advertisedAddr) String() string  { return string(a) }
