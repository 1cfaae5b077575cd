// Command gateway runs Alicia's HTTP and WebSocket edge alone.
package main

import (
	"context"

	"github.com/rs/zerolog"

	"github.com/alicia-voice/alicia/pkg/svcmain"
	"github.com/alicia-voice/alicia/services/gateway"
)

func main() {
	svcmain.Main("gateway", gateway.ConfigFromEnv, func(ctx context.Context, cfg gateway.Config, log zerolog.Logger) error {
		return gateway.Run(ctx, cfg, log, nil)
	})
}
