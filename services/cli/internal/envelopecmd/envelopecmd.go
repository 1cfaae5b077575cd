// Package envelopecmd converts protocol envelopes between their canonical
// MessagePack form and pretty JSON, for `alicia envelope decode|encode`.
package envelopecmd

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/alicia-voice/alicia/pkg/protocol"
)

// readAll reads at most one byte more than the protocol limit, so an
// oversized input is reported as too large without reading it all.
func readAll(in io.Reader) ([]byte, error) {
	data, err := io.ReadAll(io.LimitReader(in, int64(protocol.MaxEnvelopeSize)+1))
	if err != nil {
		return nil, fmt.Errorf("envelope: read input: %w", err)
	}
	return data, nil
}

// Decode reads one MessagePack envelope from in, validates it like any
// untrusted input, and writes it to out as indented JSON (bytes as base64).
func Decode(in io.Reader, out io.Writer) error {
	data, err := readAll(in)
	if err != nil {
		return err
	}
	env, err := protocol.Decode(data)
	if err != nil {
		return oneLine("decode", err)
	}
	js, err := protocol.EncodeJSON(env)
	if err != nil {
		return oneLine("decode", err)
	}
	var buf bytes.Buffer
	if err := json.Indent(&buf, js, "", "  "); err != nil {
		return fmt.Errorf("envelope decode: %w", err)
	}
	buf.WriteByte('\n')
	_, err = out.Write(buf.Bytes())
	return err
}

// Encode reads one JSON envelope from in, validates it, and writes its
// canonical MessagePack encoding to out.
func Encode(in io.Reader, out io.Writer) error {
	data, err := readAll(in)
	if err != nil {
		return err
	}
	env, err := protocol.DecodeJSON(data)
	if err != nil {
		return oneLine("encode", err)
	}
	b, err := protocol.Encode(env)
	if err != nil {
		return oneLine("encode", err)
	}
	_, err = out.Write(b)
	return err
}

// oneLine formats err as "envelope <op>: protocol error <code> (<name>): <reason>".
func oneLine(op string, err error) error {
	var pe *protocol.Error
	if errors.As(err, &pe) {
		return fmt.Errorf("envelope %s: protocol error %d (%s): %s", op, pe.Code, codeName(pe.Code), pe.Reason)
	}
	return fmt.Errorf("envelope %s: %w", op, err)
}

func codeName(c int32) string {
	switch c {
	case protocol.CodeMalformed:
		return "malformed envelope"
	case protocol.CodeUnknownType:
		return "unknown type"
	case protocol.CodeInvalidBody:
		return "invalid body"
	case protocol.CodeTooLarge:
		return "too large"
	}
	return "error"
}
