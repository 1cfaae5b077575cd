package upcmd

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/alicia-voice/alicia/pkg/config"
	"github.com/alicia-voice/alicia/pkg/jaeger"
	"github.com/alicia-voice/alicia/pkg/telemetry"
)

// Traces is the trace viewer of the stack: with Jaeger set, up runs Jaeger
// (pkg/jaeger: built from its Go module into the cache the first time)
// bound to 127.0.0.1 and exports the services' spans to it.
type Traces struct {
	// Jaeger runs the viewer (`alicia up --traces`, ALICIA_TRACES=true).
	Jaeger bool
	// Ports of Jaeger: the UI and query API (ALICIA_JAEGER_UI_PORT, default
	// 16686), OTLP over gRPC (ALICIA_JAEGER_OTLP_GRPC_PORT, 4317) and over
	// HTTP (ALICIA_JAEGER_OTLP_HTTP_PORT, 4318, the one the services use).
	// 0 picks a free port.
	UIPort, OTLPGRPCPort, OTLPHTTPPort int
	// UIAssets (ALICIA_JAEGER_UI_ASSETS) is a directory with another UI to
	// serve (a built jaeger-ui). Empty: pkg/jaeger's own trace viewer.
	UIAssets string
}

func defaultTraces() Traces {
	return Traces{UIPort: jaeger.DefaultUIPort, OTLPGRPCPort: jaeger.DefaultOTLPGRPCPort, OTLPHTTPPort: jaeger.DefaultOTLPHTTPPort}
}

// tracesFrom reads ALICIA_TRACES and ALICIA_JAEGER_* of src.
func tracesFrom(src config.Source, t *Traces) error {
	src.String("ALICIA_JAEGER_UI_ASSETS", &t.UIAssets)
	return errors.Join(
		src.Bool("ALICIA_TRACES", &t.Jaeger),
		src.Int("ALICIA_JAEGER_UI_PORT", &t.UIPort),
		src.Int("ALICIA_JAEGER_OTLP_GRPC_PORT", &t.OTLPGRPCPort),
		src.Int("ALICIA_JAEGER_OTLP_HTTP_PORT", &t.OTLPHTTPPort),
	)
}

func (t Traces) validate() error {
	var errs []error
	for _, p := range []struct {
		name string
		v    int
	}{{"ALICIA_JAEGER_UI_PORT", t.UIPort}, {"ALICIA_JAEGER_OTLP_GRPC_PORT", t.OTLPGRPCPort}, {"ALICIA_JAEGER_OTLP_HTTP_PORT", t.OTLPHTTPPort}} {
		if p.v < 0 || p.v > 65535 {
			errs = append(errs, fmt.Errorf("%s %d: want 0..65535", p.name, p.v))
		}
	}
	return errors.Join(errs...)
}

// tracesStack is where the stack's spans go.
type tracesStack struct {
	// server is the Jaeger up started (nil without --traces).
	server *jaeger.Server
	// replaced is the OTLP endpoint the environment named before up
	// pointed it at its Jaeger ("" when none).
	replaced string
}

func (s tracesStack) stop() error {
	if s.server == nil {
		return nil
	}
	return s.server.Stop()
}

// startTraces starts Jaeger when t asks for it (building it first when it
// is not in the cache), with its config and log in dataDir/jaeger. Its
// OTLP/HTTP receiver (jaegerEndpoint) is where the services of this
// process export, given to telemetry.SetupServicesTracing instead of the
// OTEL_EXPORTER_OTLP_ENDPOINT the environment may name.
func startTraces(ctx context.Context, t Traces, dataDir string, stderr io.Writer) (tracesStack, error) {
	if !t.Jaeger {
		return tracesStack{}, nil
	}
	if telemetry.TracingOff() {
		return tracesStack{}, errors.New("traces: OTEL_SDK_DISABLED=true or OTEL_TRACES_EXPORTER=none turns off the export --traces needs: unset them")
	}
	bin, err := jaeger.Find()
	if errors.Is(err, jaeger.ErrNotInstalled) {
		fmt.Fprintf(stderr, "Jaeger was not found: building it (%s@%s into the cache; about 6 minutes on two cores the first time).\n"+
			"Set %s to use a Jaeger v2 binary you have.\n", jaeger.Module, jaeger.Version, jaeger.EnvBin)
		bin, err = jaeger.Install(ctx, stderr)
	}
	if err != nil {
		return tracesStack{}, fmt.Errorf("traces: %w", err)
	}
	srv, err := jaeger.Start(ctx, jaeger.Options{Bin: bin, Dir: filepath.Join(dataDir, "jaeger"),
		UIPort: t.UIPort, OTLPGRPCPort: t.OTLPGRPCPort, OTLPHTTPPort: t.OTLPHTTPPort, UIAssets: t.UIAssets})
	if errors.Is(err, jaeger.ErrPortInUse) {
		err = fmt.Errorf("%w (another Jaeger or collector? set ALICIA_JAEGER_UI_PORT, ALICIA_JAEGER_OTLP_GRPC_PORT, ALICIA_JAEGER_OTLP_HTTP_PORT; 0 picks a free one)", err)
	}
	if err != nil {
		return tracesStack{}, fmt.Errorf("traces: %w", err)
	}
	s := tracesStack{server: srv}
	for _, k := range []string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT"} {
		if v := os.Getenv(k); v != "" && s.replaced == "" {
			s.replaced = v
		}
	}
	return s, nil
}

// jaegerEndpoint is the OTLP/HTTP receiver of up's Jaeger, "" without one.
func (s tracesStack) jaegerEndpoint() string {
	if s.server == nil {
		return ""
	}
	return s.server.OTLPHTTPURL
}

// endpoint is where the stack's spans go: up's Jaeger, else the OTLP
// endpoint the environment names ("" when spans are not exported).
func (s tracesStack) endpoint() string {
	if e := s.jaegerEndpoint(); e != "" {
		return e
	}
	if !telemetry.TracingEnabled() {
		return ""
	}
	return cmp.Or(os.Getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"), os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT"))
}

// serviceNames is how the banner names the service.name of the stack's
// spans: each service's own (telemetry.SetupServicesTracing, whatever
// OTEL_SERVICE_NAME says).
func serviceNames() string {
	return "services alicia-<service>: " + strings.Join(servicesTracing.Services, " ")
}

// describe is the Traces line of up's banner ("" when spans go nowhere).
func (s tracesStack) describe() string {
	if s.server == nil {
		if endpoint := s.endpoint(); endpoint != "" {
			return fmt.Sprintf("OTLP to %s (%s)", endpoint, serviceNames())
		}
		return ""
	}
	srv := s.server
	line := fmt.Sprintf("%s (Jaeger %s, in memory, %s; OTLP %s, gRPC %s; log %s)",
		srv.UIURL, jaeger.Version, serviceNames(), srv.OTLPHTTPURL, srv.OTLPGRPCAddr, srv.LogPath)
	if srv.EmbeddedUI {
		line += "\n            its page lists the recent traces, finds one by trace or conversation id, and shows a trace's spans as a waterfall"
	} else {
		line += "\n            its page is the UI of " + srv.UIAssets
	}
	if s.replaced != "" {
		line += "\n            (instead of " + s.replaced + ", the OTLP endpoint set in the environment)"
	}
	return line
}
