package main

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/alicia-voice/alicia/pkg/protocol"
	"github.com/alicia-voice/alicia/pkg/protocol/internal/optfields"
)

// vector is one golden/nil/<name> triple: the envelope of golden/<name>.json
// with optional fields sent as nil (optfields.Leaves picks them), in JSON and
// in MessagePack, and the canonical encoding of the same envelope without
// those fields.
type vector struct {
	json, nilMsgpack, canonical []byte
}

// nilVector derives the nil vector of a hand-written golden envelope. The
// canonical bytes come from the envelope with the fields deleted, never from
// decoding the nils: the vectors check that decoding, they do not echo it.
func nilVector(schemas *optfields.Schemas, src []byte) (vector, error) {
	var v vector
	tree, err := jsonTree(src)
	if err != nil {
		return v, err
	}
	typ, err := tree["type"].(json.Number).Int64()
	if err != nil {
		return v, fmt.Errorf("type: %w", err)
	}
	shape, err := schemas.Envelope(int(typ))
	if err != nil {
		return v, err
	}
	paths := optfields.Leaves(shape, tree)
	if len(paths) == 0 {
		return v, fmt.Errorf("no optional fields")
	}

	stripped, err := jsonTree(src)
	if err != nil {
		return v, err
	}
	for _, p := range paths {
		if err := optfields.SetNil(tree, p); err != nil {
			return v, err
		}
		if err := optfields.Delete(stripped, p); err != nil {
			return v, err
		}
	}
	if v.json, err = indentedJSON(tree); err != nil {
		return v, err
	}
	js, err := json.Marshal(stripped)
	if err != nil {
		return v, err
	}
	env, err := protocol.DecodeJSON(js)
	if err != nil {
		return v, fmt.Errorf("without its optional fields: %w", err)
	}
	if v.canonical, err = protocol.Encode(env); err != nil {
		return v, err
	}
	v.nilMsgpack, err = withNils(v.canonical, paths)
	return v, err
}

func jsonTree(src []byte) (map[string]any, error) {
	dec := json.NewDecoder(bytes.NewReader(src))
	dec.UseNumber()
	var tree map[string]any
	if err := dec.Decode(&tree); err != nil {
		return nil, err
	}
	return tree, nil
}

func indentedJSON(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// withNils re-encodes canonical bytes with a nil at each path: keys sorted
// and integers in their smallest form as in the canonical encoding, bin
// kept, so the nils are the only difference.
func withNils(canonical []byte, paths []optfields.Path) ([]byte, error) {
	// Not loose decoding: it would read bin as a string.
	dec := msgpack.NewDecoder(bytes.NewReader(canonical))
	var tree any
	if err := dec.Decode(&tree); err != nil {
		return nil, err
	}
	for _, p := range paths {
		if err := optfields.SetNil(tree, p); err != nil {
			return nil, err
		}
	}
	var buf bytes.Buffer
	enc := msgpack.NewEncoder(&buf)
	enc.SetSortMapKeys(true)
	enc.UseCompactInts(true)
	if err := enc.Encode(tree); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
