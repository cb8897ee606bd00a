package cli

import (
	"io"
	"log/slog"

	"github.com/straitgw/strait/internal/config"
	"github.com/straitgw/strait/internal/telemetry"
)

func newLogger(w io.Writer, cfg *config.Config) (*slog.Logger, error) {
	return telemetry.NewLogger(w, cfg.Log.Level, cfg.Log.Format)
}
