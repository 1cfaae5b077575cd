// Package optfields finds the optional fields of protocol envelopes, read
// straight from the schema files, for goldengen's nil vectors and the tests
// that send optional fields as nil. It shares nothing with the decoder's own
// schema handling, so the vectors check the decoder instead of echoing it.
package optfields

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"maps"
	"slices"
	"strings"
)

// Shape is the part of a schema that says where optional fields are: the
// declared properties of an object, which of them are required, and the
// shape of an array's items. A nil *Shape is a free-form value.
type Shape struct {
	Props    map[string]*Shape
	Required []string
	Items    *Shape
}

// Optional reports whether name is a declared property that is not required.
func (s *Shape) Optional(name string) bool {
	_, declared := s.Props[name]
	return declared && !slices.Contains(s.Required, name)
}

// Schemas are the shapes of envelope.json and of every body, by message type.
type Schemas struct {
	envelope *Shape
	bodies   map[int]*Shape
}

// Load reads envelope.json and the body schemas (those with x-alicia-type).
func Load(fsys fs.FS) (*Schemas, error) {
	files, err := fs.Glob(fsys, "*.json")
	if err != nil {
		return nil, err
	}
	s := &Schemas{bodies: map[int]*Shape{}}
	for _, f := range files {
		raw, err := fs.ReadFile(fsys, f)
		if err != nil {
			return nil, err
		}
		var doc map[string]any
		if err := json.Unmarshal(raw, &doc); err != nil {
			return nil, fmt.Errorf("%s: %w", f, err)
		}
		defs, _ := doc["$defs"].(map[string]any)
		shape, err := parse(doc, defs, 0)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", f, err)
		}
		if f == "envelope.json" {
			s.envelope = shape
			continue
		}
		if t, ok := doc["x-alicia-type"].(float64); ok {
			s.bodies[int(t)] = shape
		}
	}
	if s.envelope == nil {
		return nil, fmt.Errorf("no envelope.json")
	}
	return s, nil
}

func parse(doc, defs map[string]any, depth int) (*Shape, error) {
	if depth > 16 {
		return nil, fmt.Errorf("schema nesting too deep")
	}
	if ref, ok := doc["$ref"].(string); ok {
		name, local := strings.CutPrefix(ref, "#/$defs/")
		def, _ := defs[name].(map[string]any)
		if !local || def == nil {
			return nil, fmt.Errorf("unsupported $ref %q", ref)
		}
		return parse(def, defs, depth+1)
	}
	props, _ := doc["properties"].(map[string]any)
	items, _ := doc["items"].(map[string]any)
	if props == nil && items == nil {
		return nil, nil
	}
	s := &Shape{}
	for name, p := range props {
		m, _ := p.(map[string]any)
		c, err := parse(m, defs, depth+1)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		if s.Props == nil {
			s.Props = map[string]*Shape{}
		}
		s.Props[name] = c
	}
	required, _ := doc["required"].([]any)
	for _, r := range required {
		if name, ok := r.(string); ok {
			s.Required = append(s.Required, name)
		}
	}
	if items != nil {
		c, err := parse(items, defs, depth+1)
		if err != nil {
			return nil, fmt.Errorf("items: %w", err)
		}
		s.Items = c
	}
	return s, nil
}

// Envelope is the shape of an envelope of message type t, its body included.
func (s *Schemas) Envelope(t int) (*Shape, error) {
	body, ok := s.bodies[t]
	if !ok {
		return nil, fmt.Errorf("no schema for message type %d", t)
	}
	env := *s.envelope
	env.Props = maps.Clone(env.Props)
	env.Props["body"] = body
	return &env, nil
}

// Path leads from the envelope to a value: object keys (string) and array
// indices (int). Its last element is always an object key.
type Path []any

func (p Path) String() string {
	var b strings.Builder
	for i, e := range p {
		if i > 0 {
			b.WriteByte('/')
		}
		fmt.Fprint(&b, e)
	}
	return b.String()
}

// All lists every optional field of v, present or not, in every object v
// has where its schema declares properties (array items included). Fields
// inside an optional field are listed too. Paths come out sorted.
func All(shape *Shape, v any) []Path {
	return walk(shape, v, nil, func(any) bool { return true }, nil)
}

// Leaves lists the optional fields of v to send as nil in one vector: the
// absent ones, and the present ones that are neither objects nor arrays;
// present objects and arrays stay, with their own optional fields listed.
func Leaves(shape *Shape, v any) []Path {
	return walk(shape, v, nil, func(x any) bool {
		switch x.(type) {
		case map[string]any, []any:
			return false
		}
		return true
	}, nil)
}

// walk appends to out the optional fields of v under shape: absent ones
// always, present ones when take says so; it descends into present values.
func walk(shape *Shape, v any, at Path, take func(any) bool, out []Path) []Path {
	if shape == nil {
		return out
	}
	switch v := v.(type) {
	case map[string]any:
		for _, name := range slices.Sorted(maps.Keys(shape.Props)) {
			x, present := v[name]
			p := append(slices.Clip(at), name)
			if shape.Optional(name) && (!present || take(x)) {
				out = append(out, p)
			}
			if present {
				out = walk(shape.Props[name], x, p, take, out)
			}
		}
	case []any:
		for i, x := range v {
			out = walk(shape.Items, x, append(slices.Clip(at), i), take, out)
		}
	}
	return out
}

// SetNil sets the field at p to nil, adding it when absent.
func SetNil(v any, p Path) error {
	parent, key, err := parentOf(v, p)
	if err != nil {
		return err
	}
	parent[key] = nil
	return nil
}

// Delete removes the field at p, if present.
func Delete(v any, p Path) error {
	parent, key, err := parentOf(v, p)
	if err != nil {
		return err
	}
	delete(parent, key)
	return nil
}

func parentOf(v any, p Path) (map[string]any, string, error) {
	if len(p) == 0 {
		return nil, "", fmt.Errorf("empty path")
	}
	for _, e := range p[:len(p)-1] {
		switch e := e.(type) {
		case string:
			m, ok := v.(map[string]any)
			if !ok {
				return nil, "", fmt.Errorf("%s: not an object at %q", p, e)
			}
			v = m[e]
		case int:
			a, ok := v.([]any)
			if !ok || e >= len(a) {
				return nil, "", fmt.Errorf("%s: no item %d", p, e)
			}
			v = a[e]
		}
	}
	m, ok := v.(map[string]any)
	key, isKey := p[len(p)-1].(string)
	if !ok || !isKey {
		return nil, "", fmt.Errorf("%s: parent is not an object", p)
	}
	return m, key, nil
}

// Pattern is the path with array indices as "*" (body/messages/*/previousId):
// the same for every item of an array.
func (p Path) Pattern() string {
	var b strings.Builder
	for i, e := range p {
		if i > 0 {
			b.WriteByte('/')
		}
		if _, ok := e.(int); ok {
			b.WriteByte('*')
			continue
		}
		fmt.Fprint(&b, e)
	}
	return b.String()
}

// Declared lists the pattern of every optional field the shape declares,
// at any depth, sorted.
func Declared(shape *Shape) []string {
	return declared(shape, "", nil, 0)
}

func declared(s *Shape, prefix string, out []string, depth int) []string {
	if s == nil || depth > 32 {
		return out
	}
	for _, name := range slices.Sorted(maps.Keys(s.Props)) {
		if s.Optional(name) {
			out = append(out, prefix+name)
		}
		out = declared(s.Props[name], prefix+name+"/", out, depth+1)
	}
	if s.Items != nil {
		out = declared(s.Items, prefix+"*/", out, depth+1)
	}
	return out
}
