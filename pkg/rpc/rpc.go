package rpc

import (
	"bytes"
	"context"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"
	"github.com/vmihailenco/msgpack/v5"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/alicia-voice/alicia/pkg/telemetry"
)

var tracer = otel.Tracer("github.com/alicia-voice/alicia/pkg/rpc")

// Error codes of error replies.
const (
	CodeBadRequest  = "400"
	CodeNotFound    = "404"
	CodeInternal    = "500"
	CodeUnavailable = "503" // a dependency (embeddings backend, Postgres) is down
	CodeTimeout     = "504"
)

// ErrNoResponders is returned when no instance of the service is running.
var ErrNoResponders = errors.New("rpc: no service instance is running")

// Error is an error reply.
type Error struct {
	Subject     string
	Code        string
	Description string
}

func (e *Error) Error() string {
	return fmt.Sprintf("%s: %s %s", e.Subject, e.Code, e.Description)
}

// IsCode reports whether err is an error reply with code.
func IsCode(err error, code string) bool {
	var e *Error
	return errors.As(err, &e) && e.Code == code
}

// Call sends req (msgpack) to subject and decodes the reply into resp. The
// request carries the trace context of ctx in its headers (traceparent), so
// the service's span joins the caller's trace.
func Call(ctx context.Context, nc *nats.Conn, subject string, req, resp any) (err error) {
	return callAs(ctx, nc, subject, subject, req, resp)
}

// callAs is Call with the span named after the operation name (a subject
// with an id in it would make a span name per request).
func callAs(ctx context.Context, nc *nats.Conn, subject, name string, req, resp any) (err error) {
	ctx, span := tracer.Start(ctx, "rpc "+name, trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(attribute.String("messaging.system", "nats"), attribute.String("messaging.destination.name", subject)))
	defer func() {
		if err != nil {
			span.SetStatus(codes.Error, err.Error())
		}
		span.End()
	}()
	data, err := marshal(req)
	if err != nil {
		return fmt.Errorf("rpc: encode %s request: %w", subject, err)
	}
	out := nats.NewMsg(subject)
	out.Data = data
	telemetry.InjectHeader(ctx, out.Header)
	msg, err := nc.RequestMsgWithContext(ctx, out)
	if err != nil {
		if errors.Is(err, nats.ErrNoResponders) {
			return fmt.Errorf("%s: %w", subject, ErrNoResponders)
		}
		return fmt.Errorf("rpc: %s: %w", subject, err)
	}
	if code := msg.Header.Get(micro.ErrorCodeHeader); code != "" {
		return &Error{Subject: subject, Code: code, Description: msg.Header.Get(micro.ErrorHeader)}
	}
	if err := unmarshal(msg.Data, resp); err != nil {
		return fmt.Errorf("rpc: decode %s reply: %w", subject, err)
	}
	return nil
}

// Span starts the server span of a request a service handles, a child of
// the caller's span (the request's traceparent header).
func Span(ctx context.Context, r micro.Request, name string, attrs ...attribute.KeyValue) (context.Context, trace.Span) {
	ctx = telemetry.ExtractHeader(ctx, r.Headers())
	return tracer.Start(ctx, name, trace.WithSpanKind(trace.SpanKindServer), trace.WithAttributes(attrs...))
}

// Decode reads a request; on failure it answers 400 and returns false.
func Decode(r micro.Request, v any) bool {
	if err := unmarshal(r.Data(), v); err != nil {
		_ = r.Error(CodeBadRequest, "request is not the expected MessagePack map: "+err.Error(), nil)
		return false
	}
	return true
}

// Respond encodes v as the reply.
func Respond(r micro.Request, v any) {
	b, err := marshal(v)
	if err != nil {
		_ = r.Error(CodeInternal, "encode reply: "+err.Error(), nil)
		return
	}
	_ = r.Respond(b)
}

// Fail answers with an error reply.
func Fail(r micro.Request, code, description string) {
	if len(description) > 512 {
		description = description[:512]
	}
	_ = r.Error(code, description, nil)
}

// marshal and unmarshal fall back to json tags, so protocol bodies keep
// their wire names inside requests.
func marshal(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := msgpack.NewEncoder(&buf)
	enc.SetCustomStructTag("json")
	enc.SetOmitEmpty(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func unmarshal(data []byte, v any) error {
	dec := msgpack.NewDecoder(bytes.NewReader(data))
	dec.SetCustomStructTag("json")
	return dec.Decode(v)
}
