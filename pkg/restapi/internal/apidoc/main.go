// Command apidoc writes the reference section of the gateway's API.md
// from the OpenAPI document: every route (method, path, body, answers)
// and every schema (its fields), between the markers, keeping the prose
// around them.
package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"sort"
	"strings"
)

const (
	begin = "<!-- BEGIN GENERATED REFERENCE (pkg/restapi: go generate; from proto-schemas/rest/openapi.json) -->"
	end   = "<!-- END GENERATED REFERENCE -->"
)

type schema struct {
	Ref         string             `json:"$ref"`
	Type        any                `json:"type"`
	Format      string             `json:"format"`
	Enum        []any              `json:"enum"`
	Items       *schema            `json:"items"`
	AllOf       []schema           `json:"allOf"`
	Properties  map[string]*schema `json:"properties"`
	Required    []string           `json:"required"`
	AddProps    json.RawMessage    `json:"additionalProperties"`
	Description string             `json:"description"`
	MinLength   *int               `json:"minLength"`
	MaxLength   *int               `json:"maxLength"`
	Minimum     *float64           `json:"minimum"`
	Maximum     *float64           `json:"maximum"`
	MaxItems    *int               `json:"maxItems"`
}

type param struct {
	Ref         string  `json:"$ref"`
	Name        string  `json:"name"`
	In          string  `json:"in"`
	Description string  `json:"description"`
	Schema      *schema `json:"schema"`
}

type response struct {
	Ref         string `json:"$ref"`
	Description string `json:"description"`
	Content     map[string]struct {
		Schema *schema `json:"schema"`
	} `json:"content"`
	Headers map[string]json.RawMessage `json:"headers"`
}

type operation struct {
	Summary     string  `json:"summary"`
	Parameters  []param `json:"parameters"`
	RequestBody *struct {
		Required bool `json:"required"`
		Content  map[string]struct {
			Schema *schema `json:"schema"`
		} `json:"content"`
	} `json:"requestBody"`
	Responses map[string]response    `json:"responses"`
	Security  *[]map[string][]string `json:"security"`
}

type document struct {
	Paths      map[string]map[string]json.RawMessage `json:"paths"`
	Components struct {
		Schemas    map[string]*schema  `json:"schemas"`
		Parameters map[string]param    `json:"parameters"`
		Responses  map[string]response `json:"responses"`
	} `json:"components"`
}

var methods = []string{"get", "post", "put", "patch", "delete"}

func main() {
	spec := flag.String("spec", "", "the OpenAPI document (JSON)")
	docPath := flag.String("doc", "", "the Markdown file whose reference section is rewritten")
	flag.Parse()
	if err := run(*spec, *docPath); err != nil {
		fmt.Fprintln(os.Stderr, "apidoc:", err)
		os.Exit(1)
	}
}

func run(specPath, docPath string) error {
	raw, err := os.ReadFile(specPath)
	if err != nil {
		return err
	}
	var d document
	if err := json.Unmarshal(raw, &d); err != nil {
		return fmt.Errorf("%s: %w", specPath, err)
	}
	md, err := os.ReadFile(docPath)
	if err != nil {
		return err
	}
	i, j := bytes.Index(md, []byte(begin)), bytes.Index(md, []byte(end))
	if i < 0 || j < i {
		return fmt.Errorf("%s has no %q … %q section; add the two markers where the reference goes", docPath, begin, end)
	}
	ref, err := reference(d)
	if err != nil {
		return err
	}
	var out bytes.Buffer
	out.Write(md[:i])
	out.WriteString(begin + "\n\n" + ref + "\n")
	out.Write(md[j:])
	return os.WriteFile(docPath, out.Bytes(), 0o644)
}

func reference(d document) (string, error) {
	var b strings.Builder
	b.WriteString("### Routes\n\n")
	b.WriteString("Every route needs `Authorization: Bearer <key>` or the session cookie unless it says otherwise; ")
	b.WriteString("every route may also answer 401, 403 and 429 (with `Retry-After` when it is known), as the `Error` shape.\n\n")
	b.WriteString("| method | path | parameters | body | answers | errors |\n|---|---|---|---|---|---|\n")
	paths := make([]string, 0, len(d.Paths))
	for p := range d.Paths {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	for _, p := range paths {
		item := d.Paths[p]
		var shared []param
		if rawParams, ok := item["parameters"]; ok {
			if err := json.Unmarshal(rawParams, &shared); err != nil {
				return "", fmt.Errorf("%s parameters: %w", p, err)
			}
		}
		for _, m := range methods {
			rawOp, ok := item[m]
			if !ok {
				continue
			}
			var op operation
			if err := json.Unmarshal(rawOp, &op); err != nil {
				return "", fmt.Errorf("%s %s: %w", m, p, err)
			}
			var params []string
			for _, pr := range append(append([]param{}, shared...), op.Parameters...) {
				pr = d.param(pr)
				if pr.In == "path" {
					continue
				}
				s := fmt.Sprintf("`%s` (%s", pr.Name, pr.In)
				if pr.Description != "" {
					s += ": " + pr.Description
				}
				params = append(params, s+")")
			}
			body := ""
			if op.RequestBody != nil {
				for _, c := range op.RequestBody.Content {
					body = typeName(c.Schema)
				}
				if !op.RequestBody.Required {
					body += " (optional)"
				}
			}
			var answers, errs []string
			codes := make([]string, 0, len(op.Responses))
			for c := range op.Responses {
				codes = append(codes, c)
			}
			sort.Strings(codes)
			for _, c := range codes {
				r := d.response(op.Responses[c])
				if c >= "400" {
					if c != "401" && c != "403" && c != "429" {
						errs = append(errs, c)
					}
					continue
				}
				s := c
				for _, ct := range r.Content {
					if ct.Schema != nil {
						s += " " + typeName(ct.Schema)
					}
				}
				if len(r.Content) == 0 || strings.HasPrefix(s, "200 string") {
					s += " " + r.Description
				}
				answers = append(answers, s)
			}
			auth := ""
			if op.Security != nil && len(*op.Security) == 0 {
				auth = " (no credential)"
			}
			fmt.Fprintf(&b, "| %s | `%s`%s | %s | %s | %s | %s |\n", strings.ToUpper(m), p, auth,
				cell(strings.Join(params, "; ")), cell(body), cell(strings.Join(answers, "; ")), cell(strings.Join(errs, ", ")))
		}
	}
	b.WriteString("\n### Shapes\n\nA field marked `?` may be absent; `| null` may be null.\n")
	names := make([]string, 0, len(d.Components.Schemas))
	for n := range d.Components.Schemas {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		s := d.Components.Schemas[n]
		fmt.Fprintf(&b, "\n**%s**", n)
		if s.Description != "" {
			fmt.Fprintf(&b, ": %s", s.Description)
		}
		b.WriteString("\n\n")
		var parts []*schema
		if len(s.AllOf) > 0 {
			var bases []string
			for k := range s.AllOf {
				if s.AllOf[k].Ref != "" {
					bases = append(bases, typeName(&s.AllOf[k]))
				} else {
					parts = append(parts, &s.AllOf[k])
				}
			}
			fmt.Fprintf(&b, "%s, and:\n\n", strings.Join(bases, ", "))
		} else {
			parts = []*schema{s}
		}
		for _, part := range parts {
			fields(&b, part)
		}
	}
	return b.String(), nil
}

func fields(b *strings.Builder, s *schema) {
	req := map[string]bool{}
	for _, r := range s.Required {
		req[r] = true
	}
	keys := make([]string, 0, len(s.Properties))
	for k := range s.Properties {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		p := s.Properties[k]
		opt := ""
		if !req[k] {
			opt = "?"
		}
		line := fmt.Sprintf("- `%s`%s: %s%s", k, opt, typeName(p), bounds(p))
		if p.Description != "" {
			line += " — " + p.Description
		}
		b.WriteString(line + "\n")
	}
}

func (d document) param(p param) param {
	if p.Ref != "" {
		return d.Components.Parameters[strings.TrimPrefix(p.Ref, "#/components/parameters/")]
	}
	return p
}

func (d document) response(r response) response {
	if r.Ref != "" {
		return d.Components.Responses[strings.TrimPrefix(r.Ref, "#/components/responses/")]
	}
	return r
}

// typeName is how a field's type reads in the reference.
func typeName(s *schema) string {
	if s == nil {
		return "any"
	}
	if s.Ref != "" {
		return s.Ref[strings.LastIndex(s.Ref, "/")+1:]
	}
	var t string
	nullable := false
	switch v := s.Type.(type) {
	case string:
		t = v
	case []any:
		for _, x := range v {
			if x == "null" {
				nullable = true
			} else {
				t, _ = x.(string)
			}
		}
	}
	switch {
	case len(s.Enum) > 0:
		var vs []string
		for _, e := range s.Enum {
			if e != nil {
				vs = append(vs, fmt.Sprintf("%q", e))
			}
		}
		t = strings.Join(vs, " \\| ")
	case t == "array":
		t = "[" + typeName(s.Items) + "]"
	case t == "object" && len(s.AddProps) > 0 && s.AddProps[0] == '{':
		var v schema
		if json.Unmarshal(s.AddProps, &v) == nil {
			t = "{string: " + typeName(&v) + "}"
		}
	case t == "":
		t = "any JSON value"
	case s.Format != "":
		t += " (" + s.Format + ")"
	}
	if nullable {
		t += " \\| null"
	}
	return t
}

func bounds(s *schema) string {
	var out []string
	if s.MinLength != nil || s.MaxLength != nil {
		out = append(out, fmt.Sprintf("length %s..%s", num(s.MinLength, "0"), num(s.MaxLength, "")))
	}
	if s.Minimum != nil || s.Maximum != nil {
		out = append(out, fmt.Sprintf("%s..%s", fnum(s.Minimum), fnum(s.Maximum)))
	}
	if s.MaxItems != nil {
		out = append(out, fmt.Sprintf("at most %d", *s.MaxItems))
	}
	if s.Items != nil && (s.Items.MinLength != nil || s.Items.MaxLength != nil) {
		out = append(out, "each "+bounds(s.Items)[2:len(bounds(s.Items))-1])
	}
	if len(out) == 0 {
		return ""
	}
	return " (" + strings.Join(out, ", ") + ")"
}

func num(n *int, def string) string {
	if n == nil {
		return def
	}
	return fmt.Sprint(*n)
}

func fnum(f *float64) string {
	if f == nil {
		return ""
	}
	return fmt.Sprint(*f)
}

func cell(s string) string { return strings.ReplaceAll(s, "|", "\\|") }
