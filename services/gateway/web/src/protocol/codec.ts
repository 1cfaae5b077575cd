// The envelope codec: the canonical MessagePack form of proto-schemas/README.md
// ("Canonical MessagePack encoding"), the JSON form, and typed helpers.
//
// Values in JavaScript: bytes fields are Uint8Array; integers are numbers,
// or bigints beyond Number.MAX_SAFE_INTEGER (only free-form values such as
// meta can hold those); an absent optional field is a missing key (undefined
// and null are accepted as absent when encoding).
import { Decoder, Encoder } from '@msgpack/msgpack'
import { ErrorCode, MAX_ENVELOPE_SIZE, ProtocolError, type ErrorCodeNumber } from './errors'
import type { ObjectShape, Shape } from './shape'
import { BODY_SHAPES } from './shapes.gen'
import {
  CLIENT_TYPES,
  MessageType,
  type BodyByName,
  type BodyByType,
  type MessageTypeName,
  type MessageTypeNumber,
} from './types.gen'
import { MAX_DEPTH, checkWellFormed } from './wellformed'

export interface Envelope<B = unknown> {
  // Client: +1, +2, … per conversation; server: negative; absent (or 0): not stamped yet.
  stanzaId?: number
  // Absent for envelopes not tied to a conversation.
  conversationId?: string
  type: number
  // Free-form metadata (timestamp, clientVersion, messaging.trace_id, …).
  meta?: Record<string, unknown>
  body: B
}

// An envelope whose body is the one of its type.
export type TypedEnvelope<T extends MessageTypeNumber> = Envelope<BodyByType[T]> & { type: T }

// Any known envelope: switch on env.type and env.body is typed.
export type AnyEnvelope = { [T in MessageTypeNumber]: TypedEnvelope<T> }[MessageTypeNumber]

export interface EnvelopeOptions {
  stanzaId?: number
  conversationId?: string
  meta?: Record<string, unknown>
}

const TYPE_NAMES = new Map<number, MessageTypeName>(
  Object.entries(MessageType).map(([name, n]) => [n, name as MessageTypeName]),
)

// The name of a type number (for logs), or undefined if no schema defines it.
export function messageTypeName(type: number): MessageTypeName | undefined {
  return TYPE_NAMES.get(type)
}

// Whether a client may send envelopes of this type (x-alicia-senders);
// the edges refuse the others with 203.
export function clientMaySend(type: number): boolean {
  return CLIENT_TYPES.has(type)
}

// makeEnvelope builds an envelope whose body is checked against its type by
// the compiler: makeEnvelope(MessageType.UserMessage, {...}) or
// makeEnvelope('UserMessage', {...}).
export function makeEnvelope<T extends MessageTypeNumber>(type: T, body: BodyByType[T], opts?: EnvelopeOptions): TypedEnvelope<T>
export function makeEnvelope<K extends MessageTypeName>(
  type: K,
  body: BodyByName[K],
  opts?: EnvelopeOptions,
): TypedEnvelope<(typeof MessageType)[K]>
export function makeEnvelope(type: number | MessageTypeName, body: unknown, opts: EnvelopeOptions = {}): Envelope {
  const t = typeof type === 'string' ? MessageType[type] : type
  const env: Envelope = { type: t, body }
  if (opts.stanzaId !== undefined) env.stanzaId = opts.stanzaId
  if (opts.conversationId !== undefined) env.conversationId = opts.conversationId
  if (opts.meta !== undefined) env.meta = opts.meta
  return env
}

// isEnvelopeOf narrows an envelope to the body of its type.
export function isEnvelopeOf<T extends MessageTypeNumber>(env: Envelope, type: T): env is TypedEnvelope<T> {
  return env.type === type
}

// ---- values ---------------------------------------------------------------

// Where a value comes from: the caller (encodeEnvelope: undefined means
// absent, undeclared body fields are an error), @msgpack/msgpack's decoder,
// or JSON.parse (bytes are base64 strings). Undeclared fields read from the
// wire are ignored, as the README says.
type Source = 'js' | 'msgpack' | 'json'

const MIN_INT64 = -(2n ** 63n)
const MAX_UINT64 = 2n ** 64n - 1n

class Invalid extends Error {}

function fail(path: string, msg: string): never {
  throw new Invalid(path ? `${path}: ${msg}` : msg)
}

// depth is how deep a value sits: the envelope's own fields at 1. Maps and
// arrays may nest MAX_DEPTH deep, the envelope's map included, as readers
// refuse more (101).
function container(depth: number, path: string): void {
  if (depth + 1 > MAX_DEPTH) fail(path, `nested more than ${MAX_DEPTH} deep`)
}

// Bytewise (UTF-8) order of two strings, which is code point order (plain
// < compares UTF-16 code units and puts U+E000…U+FFFF after astral characters).
export function compareBytewise(a: string, b: string): number {
  const n = Math.min(a.length, b.length)
  for (let i = 0; i < n; i++) {
    const x = a.charCodeAt(i)
    const y = b.charCodeAt(i)
    if (x === y) continue
    // A surrogate is part of a character above U+FFFF: after every BMP one.
    const xs = x >= 0xd800 && x <= 0xdfff
    const ys = y >= 0xd800 && y <= 0xdfff
    if (xs !== ys) return xs ? 1 : -1
    return x - y
  }
  return a.length - b.length
}

function sortedKeys(o: object): string[] {
  return Object.keys(o).sort(compareBytewise)
}

function isPlainObject(v: unknown): v is Record<string, unknown> {
  if (typeof v !== 'object' || v === null) return false
  const p: unknown = Object.getPrototypeOf(v)
  return p === Object.prototype || p === null
}

function set(o: Record<string, unknown>, k: string, v: unknown): void {
  if (k === '__proto__') Object.defineProperty(o, k, { value: v, enumerable: true, writable: true, configurable: true })
  else o[k] = v
}

const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/

function checkString(s: string, path: string, src: Source): void {
  // Decoded strings were checked as UTF-8 already; JavaScript strings can
  // hold lone surrogates, which have no UTF-8 form.
  if (src !== 'msgpack' && LONE_SURROGATE.test(s)) fail(path, 'string has a lone UTF-16 surrogate (not valid UTF-8)')
}

function typeName(v: unknown): string {
  if (v === null) return 'null'
  if (v === undefined) return 'undefined'
  if (Array.isArray(v)) return 'array'
  if (v instanceof Uint8Array) return 'bytes'
  if (typeof v === 'bigint') return 'integer'
  if (typeof v === 'number') return Number.isInteger(v) ? 'integer' : 'number'
  if (typeof v === 'object') return isPlainObject(v) ? 'object' : Object.prototype.toString.call(v).slice(8, -1)
  return typeof v
}

// A number or bigint in its canonical JavaScript form: safe integers and
// non-integral numbers as numbers, larger integers as bigints.
function normNumber(v: number | bigint, path: string): number | bigint {
  if (typeof v === 'bigint') {
    if (v < MIN_INT64 || v > MAX_UINT64) fail(path, 'integer out of the 64-bit range')
    return v >= BigInt(Number.MIN_SAFE_INTEGER) && v <= BigInt(Number.MAX_SAFE_INTEGER) ? Number(v) : v
  }
  if (!Number.isFinite(v)) fail(path, 'number is NaN or infinite')
  return Object.is(v, -0) ? 0 : v
}

// A free-form (JSON data model) value: null is a value here.
function normAny(v: unknown, path: string, src: Source, depth: number): unknown {
  switch (typeof v) {
    case 'string':
      checkString(v, path, src)
      return v
    case 'boolean':
      return v
    case 'number':
    case 'bigint':
      return normNumber(v, path)
    case 'object':
      if (v === null) return null
      if (Array.isArray(v)) {
        container(depth, path)
        return v.map((e, i) => (e === undefined ? null : normAny(e, `${path}/${i}`, src, depth + 1)))
      }
      if (v instanceof Uint8Array) fail(path, 'binary data is only allowed in bytes fields')
      if (!isPlainObject(v)) fail(path, `cannot encode ${typeName(v)}`)
      return normMap(v, undefined, path, src, depth)
  }
  return fail(path, `cannot encode ${typeName(v)}`)
}

// A map of free-form values, or of values of the shape additional.
function normMap(
  v: Record<string, unknown>,
  additional: Shape | undefined,
  path: string,
  src: Source,
  depth: number,
): Record<string, unknown> {
  container(depth, path)
  const out: Record<string, unknown> = {}
  for (const k of sortedKeys(v)) {
    checkString(k, path, src)
    const e = v[k]
    if (e === undefined) continue
    set(out, k, additional ? norm(additional, e, `${path}/${k}`, src, depth + 1) : normAny(e, `${path}/${k}`, src, depth + 1))
  }
  return out
}

const BASE64 = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/

export function base64ToBytes(s: string): Uint8Array<ArrayBuffer> {
  if (!BASE64.test(s)) throw new Error('not padded standard base64')
  const bin = atob(s)
  const out = new Uint8Array(bin.length)
  for (let i = 0; i < bin.length; i++) out[i] = bin.charCodeAt(i)
  return out
}

export function bytesToBase64(b: Uint8Array): string {
  let bin = ''
  for (let i = 0; i < b.length; i += 0x8000) bin += String.fromCharCode(...b.subarray(i, i + 0x8000))
  return btoa(bin)
}

// norm checks v against shape and returns its canonical JavaScript form:
// optional fields that are null (or undefined) dropped, empty optional
// arrays, maps and bytes dropped, keys in bytewise order, bytes as a fresh
// Uint8Array, numbers as normNumber makes them.
function norm(shape: Shape, v: unknown, path: string, src: Source, depth: number): unknown {
  switch (shape.t) {
    case 'any':
      return normAny(v, path, src, depth)
    case 'string':
      if (typeof v !== 'string') return fail(path, `got ${typeName(v)}, want string`)
      checkString(v, path, src)
      if (shape.enum && !shape.enum.includes(v)) fail(path, `value ${JSON.stringify(v)} is not one of ${JSON.stringify(shape.enum)}`)
      return v
    case 'bytes':
      if (src === 'json') {
        if (typeof v !== 'string') return fail(path, `got ${typeName(v)}, want a base64 string`)
        try {
          return base64ToBytes(v)
        } catch {
          return fail(path, 'not padded standard base64')
        }
      }
      if (!(v instanceof Uint8Array)) {
        return fail(path, src === 'msgpack' ? 'must be MessagePack bin' : `got ${typeName(v)}, want Uint8Array`)
      }
      return new Uint8Array(v) // a copy: decoded bytes do not alias the input
    case 'boolean':
      if (typeof v !== 'boolean') return fail(path, `got ${typeName(v)}, want boolean`)
      return v
    case 'integer':
    case 'number': {
      if (typeof v !== 'number' && typeof v !== 'bigint') return fail(path, `got ${typeName(v)}, want ${shape.t}`)
      const n = normNumber(v, path)
      if (shape.t === 'integer' && typeof n === 'number' && !Number.isSafeInteger(n)) {
        fail(path, Number.isInteger(n) ? 'integer beyond 2^53-1 must be a bigint' : `got number, want integer`)
      }
      if (shape.min !== undefined && n < shape.min) fail(path, `minimum: got ${n}, want ${shape.min}`)
      if (shape.max !== undefined && n > shape.max) fail(path, `maximum: got ${n}, want ${shape.max}`)
      return n
    }
    case 'array':
      if (!Array.isArray(v)) return fail(path, `got ${typeName(v)}, want array`)
      container(depth, path)
      return v.map((e, i) => (shape.items ? norm(shape.items, e, `${path}/${i}`, src, depth + 1) : normAny(e, `${path}/${i}`, src, depth + 1)))
    case 'object':
      if (!isPlainObject(v)) return fail(path, `got ${typeName(v)}, want object`)
      return shape.props ? normObject(shape, v, path, src, depth) : normMap(v, shape.additional, path, src, depth)
  }
}

function isEmptyOptional(shape: Shape, v: unknown): boolean {
  switch (shape.t) {
    case 'array':
      return (v as unknown[]).length === 0
    case 'bytes':
      return (v as Uint8Array).length === 0
    case 'object':
      return !shape.props && Object.keys(v as object).length === 0
  }
  return false
}

function normObject(shape: ObjectShape, v: Record<string, unknown>, path: string, src: Source, depth: number): Record<string, unknown> {
  container(depth, path)
  const props = shape.props ?? {}
  const required = shape.required ?? []
  for (const r of required) {
    if (!Object.hasOwn(v, r) || v[r] === undefined) fail(path, `missing required property ${JSON.stringify(r)}`)
  }
  const out: Record<string, unknown> = {}
  for (const k of sortedKeys(v)) {
    const e = v[k]
    const ps = Object.hasOwn(props, k) ? props[k] : undefined
    if (ps === undefined) {
      if (shape.additional) {
        if (e !== undefined) set(out, k, norm(shape.additional, e, `${path}/${k}`, src, depth + 1))
      } else if (src === 'js' && e !== undefined) {
        fail(`${path}/${k}`, 'not a property of the schema')
      }
      continue
    }
    const optional = !required.includes(k)
    if (e === undefined || (e === null && optional)) continue
    const n = norm(ps, e, `${path}/${k}`, src, depth + 1)
    if (optional && isEmptyOptional(ps, n)) continue
    set(out, k, n)
  }
  return out
}

// ---- envelope ---------------------------------------------------------------

class HeaderError extends Error {
  constructor(
    readonly code: ErrorCodeNumber,
    msg: string,
  ) {
    super(msg)
  }
}

function headerInt(v: unknown, name: string, lo: number, hi: number): number {
  if (typeof v === 'bigint') {
    if (v < BigInt(lo) || v > BigInt(hi)) throw new HeaderError(ErrorCode.Malformed, `${name} ${v} out of range [${lo}, ${hi}]`)
    return Number(v)
  }
  if (typeof v !== 'number' || !Number.isInteger(v)) throw new HeaderError(ErrorCode.Malformed, `${name} must be an integer`)
  if (v < lo || v > hi) throw new HeaderError(ErrorCode.Malformed, `${name} ${v} out of range [${lo}, ${hi}]`)
  return v
}

// normEnvelope checks an envelope's header and body and returns its
// canonical JavaScript form. bodyError is a problem found in the body's
// bytes before (wellformed.ts), thrown once the header is known good.
function normEnvelope(raw: unknown, src: Source, bodyError?: ProtocolError): AnyEnvelope {
  try {
    if (!isPlainObject(raw)) throw new HeaderError(ErrorCode.Malformed, 'envelope is not a MessagePack map')
    const out: Envelope = { type: 0, body: undefined }
    const stanzaId = raw.stanzaId
    if (stanzaId !== undefined && stanzaId !== null) {
      const s = headerInt(stanzaId, 'stanzaId', -2147483648, 2147483647)
      if (s !== 0) out.stanzaId = s
    }
    const cid = raw.conversationId
    if (cid !== undefined && cid !== null) {
      if (typeof cid !== 'string') throw new HeaderError(ErrorCode.Malformed, 'conversationId must be a UTF-8 string')
      try {
        checkString(cid, 'conversationId', src)
      } catch (e) {
        throw new HeaderError(ErrorCode.Malformed, (e as Error).message)
      }
      if (cid !== '') out.conversationId = cid
    }
    if (!Object.hasOwn(raw, 'type') || raw.type === undefined) throw new HeaderError(ErrorCode.Malformed, 'envelope has no type')
    out.type = headerInt(raw.type, 'type', 0, 65535)
    const meta = raw.meta
    if (meta !== undefined && meta !== null) {
      if (!isPlainObject(meta)) throw new HeaderError(ErrorCode.Malformed, 'meta must be a map')
      let m: Record<string, unknown>
      try {
        m = normMap(meta, undefined, 'meta', src, 1)
      } catch (e) {
        if (e instanceof Invalid) throw new HeaderError(ErrorCode.Malformed, e.message)
        throw e
      }
      if (Object.keys(m).length > 0) out.meta = m
    }
    if (!Object.hasOwn(raw, 'body') || raw.body === undefined) throw new HeaderError(ErrorCode.Malformed, 'envelope has no body')
    if (!isPlainObject(raw.body)) throw new HeaderError(ErrorCode.Malformed, 'body must be a map')
    const shape = BODY_SHAPES[out.type]
    if (!shape) throw new HeaderError(ErrorCode.UnknownType, `unknown message type ${out.type}`)
    if (bodyError) throw bodyError
    try {
      out.body = norm(shape, raw.body, 'body', src, 1)
    } catch (e) {
      if (e instanceof Invalid) throw new HeaderError(ErrorCode.InvalidBody, e.message)
      throw e
    }
    return out as AnyEnvelope
  } catch (e) {
    if (e instanceof HeaderError) throw new ProtocolError(e.code, e.message)
    throw e
  }
}

// ---- MessagePack -------------------------------------------------------------

// The library writes numbers as the canonical form wants (safe integers in
// their smallest integer form, other numbers as float64) except that, with
// useBigInt64 (needed for bigints), it writes safe integers beyond 32 bits as
// float64. toWire turns those into bigints, which it writes as uint64/int64:
// the smallest form for them. It also fixes the key order: the library's
// sortKeys compares UTF-16 code units, not bytes, and an object lists
// integer-like keys ("7", "10") first whatever the insertion order, so a map
// whose own order is not bytewise is handed over as a Proxy listing its keys
// in bytewise order.
function toWire(v: unknown): unknown {
  if (typeof v === 'number') {
    return Number.isSafeInteger(v) && (v >= 2 ** 32 || v < -(2 ** 31)) ? BigInt(v) : v
  }
  if (typeof v === 'bigint') {
    return v >= -(2n ** 31n) && v < 2n ** 32n ? Number(v) : v
  }
  if (Array.isArray(v)) return v.map(toWire)
  if (isPlainObject(v)) {
    const keys = sortedKeys(v)
    const out: Record<string, unknown> = Object.create(null) as Record<string, unknown>
    for (const k of keys) out[k] = toWire(v[k])
    const own = Object.keys(out)
    if (own.every((k, i) => k === keys[i])) return out
    return new Proxy(out, { ownKeys: () => keys })
  }
  return v
}

const encoder = new Encoder({ useBigInt64: true, sortKeys: false, forceFloat32: false, ignoreUndefined: true })

// The decoder reads int64/uint64 as bigints (normNumber turns the safe ones
// back into numbers) and leaves the checks of wellformed.ts to it: every key
// is a string by then.
const decoder = new Decoder({ useBigInt64: true, mapKeyConverter: (k: unknown) => String(k) })

// encodeEnvelope writes env in the canonical MessagePack form. It checks the
// body against its type's schema as it goes and throws a ProtocolError (the
// code a reader would answer with) for an unknown type or an invalid body.
export function encodeEnvelope(env: Envelope): Uint8Array<ArrayBuffer> {
  const canon = normEnvelope(env, 'js')
  const wire: Record<string, unknown> = { body: canon.body, type: canon.type }
  if (canon.conversationId !== undefined) wire.conversationId = canon.conversationId
  if (canon.meta !== undefined) wire.meta = canon.meta
  if (canon.stanzaId !== undefined) wire.stanzaId = canon.stanzaId
  const out = encoder.encode(toWire(wire))
  if (out.length > MAX_ENVELOPE_SIZE) {
    throw new ProtocolError(ErrorCode.TooLarge, `envelope is ${out.length} bytes, limit ${MAX_ENVELOPE_SIZE}`)
  }
  return out
}

// decodeEnvelope reads an envelope from any well-formed MessagePack that
// means the same as its canonical form: nil optional fields read as absent,
// at every depth; empty optional arrays and maps, stanzaId 0 and an empty
// conversationId too (the canonical form leaves them out). Throws a
// ProtocolError: 104 too large, 101 malformed, 102 unknown type, 103 invalid
// body. Takes a WebSocket message's data as it comes (ArrayBuffer).
export function decodeEnvelope(input: Uint8Array | ArrayBuffer): AnyEnvelope {
  const data = input instanceof Uint8Array ? input : new Uint8Array(input)
  if (data.length > MAX_ENVELOPE_SIZE) {
    throw new ProtocolError(ErrorCode.TooLarge, `envelope is ${data.length} bytes, limit ${MAX_ENVELOPE_SIZE}`)
  }
  const bodyError = checkWellFormed(data)
  let raw: unknown
  try {
    raw = decoder.decode(data)
  } catch (e) {
    if (bodyError) throw bodyError
    throw new ProtocolError(ErrorCode.Malformed, e instanceof Error ? e.message : String(e))
  }
  return normEnvelope(raw, 'msgpack', bodyError)
}

// ---- JSON --------------------------------------------------------------------

// envelopeFromJSON reads an envelope in the JSON form (the value JSON.parse
// returns; bytes fields as base64 strings) with the same checks and
// normalisation as decodeEnvelope.
export function envelopeFromJSON(value: unknown): AnyEnvelope {
  return normEnvelope(value, 'json')
}

// envelopeToJSON returns the JSON form of an envelope (for JSON.stringify):
// bytes as base64 strings, keys in bytewise order. Integers beyond 2^53-1
// (bigints) become numbers and lose precision, as they would in any JSON.
export function envelopeToJSON(env: Envelope): Record<string, unknown> {
  const canon = normEnvelope(env, 'js')
  const conv = (v: unknown): unknown => {
    if (v instanceof Uint8Array) return bytesToBase64(v)
    if (typeof v === 'bigint') return Number(v)
    if (Array.isArray(v)) return v.map(conv)
    if (isPlainObject(v)) {
      const out: Record<string, unknown> = {}
      for (const k of sortedKeys(v)) set(out, k, conv(v[k]))
      return out
    }
    return v
  }
  return conv(canon) as Record<string, unknown>
}
