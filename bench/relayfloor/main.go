// Command relayfloor is the floor of any HTTP gateway written in Go on
// this host: a byte relay that pairs each client connection with a
// connection to the target and copies both ways, with no HTTP parsing at
// all. Run `strait bench llm` through it and through the gateway, with
// --watch-pid on each, to see what of the gateway's CPU per request is
// the Go runtime and the kernel moving the bytes, and what is HTTP.
//
//	go run ./bench/relayfloor -listen 127.0.0.1:28190 -target 127.0.0.1:28100
//
// It serves until interrupted.
package main

import (
	"flag"
	"fmt"
	"io"
	"net"
	"os"
)

func main() {
	listen := flag.String("listen", "127.0.0.1:28190", "address to accept clients on")
	target := flag.String("target", "127.0.0.1:28100", "address to relay each connection to")
	flag.Parse()
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		fmt.Fprintln(os.Stderr, "relayfloor:", err)
		os.Exit(1)
	}
	fmt.Printf("relayfloor: %s -> %s (pid %d)\n", ln.Addr(), *target, os.Getpid())
	for {
		c, err := ln.Accept()
		if err != nil {
			fmt.Fprintln(os.Stderr, "relayfloor:", err)
			os.Exit(1)
		}
		go relay(c, *target)
	}
}

func relay(c net.Conn, target string) {
	defer c.Close()
	up, err := net.Dial("tcp", target)
	if err != nil {
		return
	}
	defer up.Close()
	done := make(chan struct{})
	go func() {
		io.Copy(c, up)
		c.(*net.TCPConn).CloseWrite()
		close(done)
	}()
	io.Copy(up, c)
	up.(*net.TCPConn).CloseWrite()
	<-done
}
