// Command strait is the Strait gateway. Everything lives in internal/cli.
package main

import (
	"os"

	"github.com/straitgw/strait/internal/cli"
)

func main() { os.Exit(cli.Run(os.Args[1:], os.Stdout, os.Stderr)) }
