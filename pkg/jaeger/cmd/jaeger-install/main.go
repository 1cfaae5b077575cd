// Command jaeger-install builds the Jaeger binary of pkg/jaeger into the
// cache unless it is there, and prints its path: what `alicia dev
// jaeger-install` does, without building the alicia command (the Taskfile's
// jaeger-install task runs it beside the deps task, before the cgo
// packages that alicia needs are installed).
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/alicia-voice/alicia/pkg/jaeger"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	start := time.Now()
	p, err := jaeger.Ensure(ctx, os.Stderr)
	if err != nil {
		fmt.Fprintln(os.Stderr, "jaeger-install:", err)
		os.Exit(1)
	}
	if d := time.Since(start); d > time.Second {
		fmt.Fprintf(os.Stderr, "jaeger-install: ready in %s\n", d.Round(time.Second))
	}
	fmt.Println(p)
}
