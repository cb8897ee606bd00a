package cli

import (
	"context"
	"fmt"
	"io"
)

func runRun(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("run", stdout, stderr)
	path := fs.String("c", "", "config file (YAML)")
	fs.StringVar(path, "config", "", "config file (YAML); same as -c")
	if err := parse(fs, args); err != nil {
		return err
	}
	if *path == "" {
		fmt.Fprintln(stderr, "strait run: -c FILE is required (see examples/passthrough.yaml)")
		return errUsage
	}
	cfg, b, err := loadConfig(*path)
	if err != nil {
		return fmt.Errorf("invalid config:\n%w", err)
	}
	log, err := newLogger(stderr, cfg)
	if err != nil {
		return err
	}
	log.Info("starting", "version", versionString(), "config", *path)
	rl := newReloader(*path, cfg, b, log)
	// Before the listeners open: SIGHUP's default would end the process.
	rctx, stopReloads := context.WithCancel(ctx)
	defer stopReloads()
	rl.reloadOnSIGHUP(rctx)
	g, err := startGateway(cfg, b, log, rl)
	if err != nil {
		return err
	}
	rl.attach(g)
	if err := rl.watchFile(rctx); err != nil {
		log.Warn("cannot watch the config file for changes; reload with SIGHUP or POST /-/reload", "config", *path, "err", err)
	}
	<-ctx.Done()
	log.Info("shutting down: draining connections", "timeout", g.drain.Duration.String())
	if err := g.stop(context.Background()); err != nil {
		log.Warn("shutdown", "err", err)
	}
	log.Info("stopped")
	return nil
}

func runValidate(_ context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("validate", stdout, stderr)
	path := fs.String("c", "", "config file (YAML)")
	fs.StringVar(path, "config", "", "config file (YAML); same as -c")
	if err := parse(fs, args); err != nil {
		return err
	}
	if *path == "" {
		fmt.Fprintln(stderr, "strait validate: -c FILE is required")
		return errUsage
	}
	if _, _, err := loadConfig(*path); err != nil {
		return fmt.Errorf("%s is not valid:\n%w", *path, err)
	}
	fmt.Fprintf(stdout, "%s is valid\n", *path)
	return nil
}
