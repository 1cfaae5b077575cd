// Package devcmd implements `alicia dev ...`: helpers for the local
// development stack.
package devcmd

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/alicia-voice/alicia/pkg/jaeger"
	"github.com/alicia-voice/alicia/pkg/livekitserver"
	"github.com/alicia-voice/alicia/pkg/localpg"
)

// PostgresURL starts (or reuses) the local PostgreSQL 17 + pgvector server
// and prints only its URL on stdout, so that
//
//	export ALICIA_POSTGRES_URL=$(alicia dev postgres)
//
// works. Progress goes to stderr. When ALICIA_POSTGRES_URL is already set, it
// is checked and printed.
func PostgresURL(ctx context.Context, stdout, stderr io.Writer) error {
	url, err := localpg.Ensure(ctx, localpg.Options{Log: stderr})
	if err != nil {
		return err
	}
	_, err = fmt.Fprintln(stdout, url)
	return err
}

// LiveKitInstall installs livekit-server (livekitserver.Version) into the
// cache unless it is already found, and prints only its path on stdout.
// Progress goes to stderr.
func LiveKitInstall(ctx context.Context, stdout, stderr io.Writer) error {
	path, err := livekitserver.Ensure(ctx, stderr)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintln(stdout, path)
	return err
}

// JaegerInstall prints the path of the Jaeger binary `alicia up --traces`
// runs, building it first (pkg/jaeger, minutes) when it is not in the
// cache. Progress goes to stderr.
func JaegerInstall(ctx context.Context, stdout, stderr io.Writer) error {
	start := time.Now()
	path, err := jaeger.Ensure(ctx, stderr)
	if err != nil {
		return err
	}
	if d := time.Since(start); d > time.Second {
		fmt.Fprintf(stderr, "jaeger: ready in %s\n", d.Round(time.Second))
	}
	_, err = fmt.Fprintln(stdout, path)
	return err
}
