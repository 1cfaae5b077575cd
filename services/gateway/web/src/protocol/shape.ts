// The codec's view of a body schema (generated into shapes.gen.ts by
// scripts/gen-types.mjs): enough to write the canonical form (which fields
// are optional, which are bytes) and to check what it reads.

export type Shape =
  | { t: 'any' } // any JSON value (a property without a type)
  | { t: 'string'; enum?: readonly string[] }
  | { t: 'bytes' } // "type": "string", "contentEncoding": "base64": bin in MessagePack, base64 in JSON
  | { t: 'boolean' }
  | { t: 'integer' | 'number'; min?: number; max?: number }
  | { t: 'array'; items?: Shape }
  | ObjectShape

// An object: declared properties (props; those not in required are
// optional), or a free-form map (no props) whose values match additional
// (any JSON value when absent).
export interface ObjectShape {
  t: 'object'
  required?: readonly string[]
  props?: Readonly<Record<string, Shape>>
  additional?: Shape
}
