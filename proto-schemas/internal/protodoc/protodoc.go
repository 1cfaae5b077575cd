// Package protodoc renders the field tables of proto-schemas/PROTOCOL.md from
// the JSON Schemas, so the specification lists exactly the fields the
// schemas define. Each table sits between two markers in PROTOCOL.md:
//
//	<!-- fields:user_message -->
//	| field | type | presence | values | description |
//	…
//	<!-- /fields -->
//
// Rewrite replaces what is between them; everything else in the document is
// written by hand.
package protodoc

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"path"
	"sort"
	"strconv"
	"strings"
)

// Schema is one schema file as PROTOCOL.md shows it.
type Schema struct {
	File      string // e.g. "user_message.json"
	Token     string // file stem: "user_message", "envelope"
	Title     string // "UserMessage"
	Number    int    // x-alicia-type; 0 for the envelope
	Direction string // x-alicia-direction, e.g. "C→S"
	Fields    []Field
}

// Field is one property of a body, nested ones included.
type Field struct {
	Path        string // "content", "memory.tags", "messages[].localId"
	Type        string // "string", "int32", "bytes", "string[]", "map<string, any>", …
	Required    bool   // within its parent object
	Values      string // enum or range, when the schema restricts them
	Description string
}

// Load reads every *.json schema at the root of fsys, ordered by message
// type number (the envelope, which has none, first).
func Load(fsys fs.FS) ([]Schema, error) {
	files, err := fs.Glob(fsys, "*.json")
	if err != nil {
		return nil, err
	}
	var out []Schema
	for _, f := range files {
		raw, err := fs.ReadFile(fsys, f)
		if err != nil {
			return nil, err
		}
		s, err := parse(f, raw)
		if err != nil {
			return nil, fmt.Errorf("protodoc: %s: %w", f, err)
		}
		out = append(out, s)
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Number < out[j].Number })
	return out, nil
}

func parse(file string, raw []byte) (Schema, error) {
	v, err := decodeOrdered(raw)
	if err != nil {
		return Schema{}, err
	}
	root, ok := v.(*object)
	if !ok {
		return Schema{}, errors.New("not a JSON object")
	}
	s := Schema{File: file, Token: strings.TrimSuffix(path.Base(file), ".json")}
	s.Title, _ = root.get("title").(string)
	s.Direction, _ = root.get("x-alicia-direction").(string)
	if n, ok := root.get("x-alicia-type").(json.Number); ok {
		i, err := strconv.Atoi(n.String())
		if err != nil {
			return s, fmt.Errorf("x-alicia-type %s: %w", n, err)
		}
		s.Number = i
	}
	defs, _ := root.get("$defs").(*object)
	w := walker{defs: defs}
	if err := w.properties(root, ""); err != nil {
		return s, err
	}
	s.Fields = w.fields
	return s, nil
}

type walker struct {
	defs   *object
	fields []Field
}

// resolve follows a local $ref (#/$defs/name).
func (w *walker) resolve(n *object) (*object, error) {
	ref, ok := n.get("$ref").(string)
	if !ok {
		return n, nil
	}
	name, ok := strings.CutPrefix(ref, "#/$defs/")
	if !ok || w.defs == nil {
		return nil, fmt.Errorf("unsupported $ref %q", ref)
	}
	d, ok := w.defs.get(name).(*object)
	if !ok {
		return nil, fmt.Errorf("$ref %q names no definition", ref)
	}
	return d, nil
}

func (w *walker) properties(n *object, prefix string) error {
	props, _ := n.get("properties").(*object)
	if props == nil {
		return nil
	}
	required := map[string]bool{}
	if req, ok := n.get("required").([]any); ok {
		for _, r := range req {
			if s, ok := r.(string); ok {
				required[s] = true
			}
		}
	}
	for _, name := range props.keys {
		p, ok := props.vals[name].(*object)
		if !ok {
			return fmt.Errorf("property %s%s is not a schema object", prefix, name)
		}
		desc, _ := p.get("description").(string) // a $ref may carry its own description
		p, err := w.resolve(p)
		if err != nil {
			return fmt.Errorf("property %s%s: %w", prefix, name, err)
		}
		if desc == "" {
			desc, _ = p.get("description").(string)
		}
		typ, err := w.typeOf(p)
		if err != nil {
			return fmt.Errorf("property %s%s: %w", prefix, name, err)
		}
		w.fields = append(w.fields, Field{Path: prefix + name, Type: typ, Required: required[name],
			Values: values(p, typ), Description: desc})
		switch p.get("type") {
		case "object":
			if err := w.properties(p, prefix+name+"."); err != nil {
				return err
			}
		case "array":
			if items, ok := p.get("items").(*object); ok {
				items, err := w.resolve(items)
				if err != nil {
					return fmt.Errorf("items of %s%s: %w", prefix, name, err)
				}
				if err := w.properties(items, prefix+name+"[]."); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// typeOf names a property's type as the specification does.
func (w *walker) typeOf(p *object) (string, error) {
	t, _ := p.get("type").(string)
	goType := ""
	if g, ok := p.get("goJSONSchema").(*object); ok {
		goType, _ = g.get("type").(string)
	}
	switch t {
	case "":
		return "any", nil
	case "string":
		if p.get("contentEncoding") == "base64" {
			return "bytes", nil
		}
		return "string", nil
	case "boolean":
		return "bool", nil
	case "number":
		return "float64", nil
	case "integer":
		if goType == "int32" || goType == "int64" {
			return goType, nil
		}
		lo, hi, _, _ := bounds(p)
		switch {
		case lo == math.MinInt32 && hi == math.MaxInt32:
			return "int32", nil
		case lo == 0 && hi == math.MaxUint16:
			return "uint16", nil
		}
		return "integer", nil
	case "array":
		items, ok := p.get("items").(*object)
		if !ok {
			return "any[]", nil
		}
		items, err := w.resolve(items)
		if err != nil {
			return "", err
		}
		it, err := w.typeOf(items)
		if err != nil {
			return "", err
		}
		return it + "[]", nil
	case "object":
		if p.get("properties") != nil {
			return "object", nil
		}
		if ap, ok := p.get("additionalProperties").(*object); ok {
			ap, err := w.resolve(ap)
			if err != nil {
				return "", err
			}
			vt, err := w.typeOf(ap)
			if err != nil {
				return "", err
			}
			return "map<string, " + vt + ">", nil
		}
		return "map<string, any>", nil
	}
	return "", fmt.Errorf("unsupported type %q", t)
}

// values describes an enum or a range narrower than the type itself.
func values(p *object, typ string) string {
	if enum, ok := p.get("enum").([]any); ok {
		parts := make([]string, len(enum))
		for i, e := range enum {
			parts[i] = fmt.Sprintf("`%v`", e)
		}
		return strings.Join(parts, ", ")
	}
	if items, ok := p.get("items").(*object); ok {
		if v := values(items, strings.TrimSuffix(typ, "[]")); v != "" {
			return "each " + v
		}
	}
	lo, hi, hasLo, hasHi := bounds(p)
	switch {
	case !hasLo && !hasHi:
		return ""
	case typ == "int32" && lo == math.MinInt32 && hi == math.MaxInt32,
		typ == "uint16" && lo == 0 && hi == math.MaxUint16:
		return ""
	case hasLo && (!hasHi || (typ == "int32" && hi == math.MaxInt32) || (typ == "int64" && hi == 1<<53-1)):
		return "≥ " + num(lo)
	case hasHi && !hasLo:
		return "≤ " + num(hi)
	}
	return num(lo) + " … " + num(hi)
}

func bounds(p *object) (lo, hi float64, hasLo, hasHi bool) {
	if n, ok := p.get("minimum").(json.Number); ok {
		lo, _ = n.Float64()
		hasLo = true
	}
	if n, ok := p.get("maximum").(json.Number); ok {
		hi, _ = n.Float64()
		hasHi = true
	}
	return lo, hi, hasLo, hasHi
}

func num(f float64) string { return strconv.FormatFloat(f, 'f', -1, 64) }

// Table is the Markdown table of s's fields.
func (s Schema) Table() string {
	var b strings.Builder
	b.WriteString("| field | type | presence | values | description |\n")
	b.WriteString("|---|---|---|---|---|\n")
	for _, f := range s.Fields {
		presence := "optional"
		if f.Required {
			presence = "required"
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s | %s | %s |\n", f.Path, cell(f.Type), presence, f.Values, cell(f.Description))
	}
	return b.String()
}

func cell(s string) string {
	s = strings.ReplaceAll(s, "\n", " ")
	s = strings.ReplaceAll(s, "|", `\|`)
	return strings.ReplaceAll(s, "<", "&lt;")
}

// Markers around the generated table of a schema.
const (
	beginPrefix = "<!-- fields:"
	beginSuffix = " -->"
	EndMarker   = "<!-- /fields -->"
)

// BeginMarker is the line that opens the table of the schema with token.
func BeginMarker(token string) string { return beginPrefix + token + beginSuffix }

// Rewrite returns doc with the table of every schema put between its
// markers, and the tokens of the schemas that have no markers in doc. A
// marker naming no schema, or one left open, is an error.
func Rewrite(doc []byte, schemas []Schema) (out []byte, missing []string, err error) {
	byToken := map[string]Schema{}
	for _, s := range schemas {
		byToken[s.Token] = s
	}
	seen := map[string]bool{}
	var b bytes.Buffer
	lines := strings.SplitAfter(string(doc), "\n")
	for i := 0; i < len(lines); i++ {
		line := lines[i]
		b.WriteString(line)
		trimmed := strings.TrimSpace(line)
		token, ok := strings.CutPrefix(trimmed, beginPrefix)
		if !ok {
			continue
		}
		token, ok = strings.CutSuffix(token, beginSuffix)
		if !ok {
			return nil, nil, fmt.Errorf("protodoc: line %d: malformed marker %q", i+1, trimmed)
		}
		s, ok := byToken[token]
		if !ok {
			return nil, nil, fmt.Errorf("protodoc: line %d: no schema %s.json", i+1, token)
		}
		if seen[token] {
			return nil, nil, fmt.Errorf("protodoc: line %d: second table for %s", i+1, token)
		}
		seen[token] = true
		j := i + 1
		for j < len(lines) && strings.TrimSpace(lines[j]) != EndMarker {
			j++
		}
		if j == len(lines) {
			return nil, nil, fmt.Errorf("protodoc: line %d: %s is not closed by %s", i+1, trimmed, EndMarker)
		}
		b.WriteString(s.Table())
		b.WriteString(lines[j])
		i = j
	}
	for _, s := range schemas {
		if !seen[s.Token] {
			missing = append(missing, s.Token)
		}
	}
	return b.Bytes(), missing, nil
}

// object is a JSON object that remembers the order of its keys (a schema's
// properties are listed in the order the author chose).
type object struct {
	keys []string
	vals map[string]any
}

func (o *object) get(k string) any {
	if o == nil {
		return nil
	}
	return o.vals[k]
}

// decodeOrdered decodes JSON into *object, []any, string, json.Number,
// bool and nil.
func decodeOrdered(raw []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	v, err := decodeValue(dec)
	if err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err == nil {
		return nil, errors.New("trailing data after the JSON value")
	}
	return v, nil
}

func decodeValue(dec *json.Decoder) (any, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	switch t := tok.(type) {
	case json.Delim:
		switch t {
		case '{':
			o := &object{vals: map[string]any{}}
			for dec.More() {
				kt, err := dec.Token()
				if err != nil {
					return nil, err
				}
				k, _ := kt.(string)
				v, err := decodeValue(dec)
				if err != nil {
					return nil, err
				}
				if _, dup := o.vals[k]; !dup {
					o.keys = append(o.keys, k)
				}
				o.vals[k] = v
			}
			_, err := dec.Token() // }
			return o, err
		case '[':
			var a []any
			for dec.More() {
				v, err := decodeValue(dec)
				if err != nil {
					return nil, err
				}
				a = append(a, v)
			}
			_, err := dec.Token() // ]
			return a, err
		}
		return nil, fmt.Errorf("unexpected %v", t)
	default:
		return t, nil
	}
}
