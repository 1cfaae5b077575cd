package protocol

import (
	"slices"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// An optional field sent as nil (MessagePack) or null (JSON) means the field
// is absent: JavaScript, Kotlin and TypeScript clients send null for unset
// optionals. Only declared, not required properties qualify; a required field
// that is null, or null in an array or a free-form value, stays what it is.
// The fast validator skips such nils itself (node.optional); the JSON tree
// the full validator checks has them removed by dropNullOptionals first.

// dropNullOptionals deletes, in place, the object members of v that are null
// where s declares them as optional properties, at every depth.
func dropNullOptionals(s *jsonschema.Schema, v any, depth int) {
	if s == nil || depth > maxDepth {
		return
	}
	if s.Ref != nil {
		dropNullOptionals(s.Ref, v, depth+1)
	}
	switch v := v.(type) {
	case map[string]any:
		for k, e := range v {
			ps, declared := s.Properties[k]
			if !declared {
				if as, ok := s.AdditionalProperties.(*jsonschema.Schema); ok {
					dropNullOptionals(as, e, depth+1)
				}
				continue
			}
			if e == nil && !slices.Contains(s.Required, k) {
				delete(v, k)
				continue
			}
			dropNullOptionals(ps, e, depth+1)
		}
	case []any:
		for _, e := range v {
			dropNullOptionals(s.Items2020, e, depth+1)
		}
	}
}
