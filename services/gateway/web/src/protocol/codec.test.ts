import { Decoder, Encoder } from '@msgpack/msgpack'
import { describe, expect, it } from 'vitest'
import {
  BODY_SHAPES,
  CLIENT_TYPES,
  ErrorCode,
  MAX_ENVELOPE_SIZE,
  MessageType,
  ProtocolError,
  clientMaySend,
  compareBytewise,
  decodeEnvelope,
  encodeEnvelope,
  envelopeFromJSON,
  envelopeToJSON,
  isEnvelopeOf,
  makeEnvelope,
  messageTypeName,
  type Envelope,
  type UserMessage,
} from '.'

// The tests run in Node; the app's tsconfig has no Node types, so the two
// fs functions used here are declared by hand.
interface FS {
  readFileSync(path: URL): Uint8Array
  readFileSync(path: URL, encoding: 'utf8'): string
  readdirSync(path: URL): string[]
}
const fs = (globalThis as unknown as { process: { getBuiltinModule(id: string): unknown } }).process.getBuiltinModule(
  'node:fs',
) as FS
const goldenDir = new URL('../../../../../proto-schemas/golden/', import.meta.url)
const nilDir = new URL('nil/', goldenDir)

const hex = (b: Uint8Array) => Array.from(b, (x) => x.toString(16).padStart(2, '0')).join('')
const bytes = (b: Uint8Array) => new Uint8Array(b) // a plain Uint8Array (readFileSync gives a Buffer)
const readJSON = (dir: URL, name: string): unknown => JSON.parse(fs.readFileSync(new URL(name, dir), 'utf8'))
const readBytes = (dir: URL, name: string) => bytes(fs.readFileSync(new URL(name, dir)))

function protocolError(f: () => unknown): ProtocolError {
  try {
    f()
  } catch (e) {
    if (e instanceof ProtocolError) return e
    throw e
  }
  throw new Error('no error thrown')
}

const goldenNames = fs
  .readdirSync(goldenDir)
  .filter((f) => f.endsWith('.json'))
  .map((f) => f.slice(0, -'.json'.length))
  .sort()
const nilNames = fs
  .readdirSync(nilDir)
  .filter((f) => f.endsWith('.json'))
  .map((f) => f.slice(0, -'.json'.length))
  .sort()

describe('golden vectors', () => {
  it('has one for every message type', () => {
    expect(goldenNames.length).toBeGreaterThan(0)
    const types = new Set(goldenNames.map((n) => decodeEnvelope(readBytes(goldenDir, n + '.msgpack')).type))
    for (const [name, t] of Object.entries(MessageType)) expect(types.has(t), `no golden vector for ${name}`).toBe(true)
  })

  describe.each(goldenNames)('%s', (name) => {
    const json = readJSON(goldenDir, name + '.json')
    const wire = readBytes(goldenDir, name + '.msgpack')

    it('encodes the JSON to the golden bytes', () => {
      expect(hex(encodeEnvelope(envelopeFromJSON(json)))).toBe(hex(wire))
    })
    it('decodes the bytes to the JSON', () => {
      const env = decodeEnvelope(wire)
      expect(envelopeToJSON(env)).toEqual(json)
      expect(env).toEqual(envelopeFromJSON(json))
    })
    it('re-encodes the decoded bytes to the same bytes', () => {
      expect(hex(encodeEnvelope(decodeEnvelope(wire)))).toBe(hex(wire))
    })
  })
})

describe('nil vectors', () => {
  it('exist', () => expect(nilNames.length).toBeGreaterThan(0))

  describe.each(nilNames)('%s', (name) => {
    const canonical = readBytes(nilDir, name + '.msgpack')
    const want = decodeEnvelope(canonical)

    it('reads nil optionals in MessagePack as absent', () => {
      const withNils = readBytes(nilDir, name + '.nil.msgpack')
      expect(decodeEnvelope(withNils)).toEqual(want)
      expect(hex(encodeEnvelope(decodeEnvelope(withNils)))).toBe(hex(canonical))
    })
    it('reads null optionals in JSON as absent', () => {
      const env = envelopeFromJSON(readJSON(nilDir, name + '.json'))
      expect(env).toEqual(want)
      expect(hex(encodeEnvelope(env))).toBe(hex(canonical))
    })
    it('encodes null optionals as absent', () => {
      // The nil JSON as a caller would hand it over (bytes as Uint8Array).
      const json = readJSON(nilDir, name + '.json') as Envelope<Record<string, unknown>>
      const body: Record<string, unknown> = { ...json.body }
      for (const [k, s] of Object.entries(BODY_SHAPES[json.type]?.props ?? {})) {
        if (s.t === 'bytes' && typeof body[k] === 'string') body[k] = Uint8Array.from(atob(body[k] as string), (c) => c.charCodeAt(0))
      }
      expect(hex(encodeEnvelope({ ...json, body }))).toBe(hex(canonical))
    })
  })
})

// An independent reference for the smallest integer forms (rule 3).
function intBytes(n: bigint): string {
  const be = (v: bigint, size: number) => {
    let s = ''
    for (let i = size - 1; i >= 0; i--) s += Number((v >> BigInt(8 * i)) & 0xffn).toString(16).padStart(2, '0')
    return s
  }
  if (n >= 0n) {
    if (n < 0x80n) return be(n, 1)
    if (n < 0x100n) return 'cc' + be(n, 1)
    if (n < 0x10000n) return 'cd' + be(n, 2)
    if (n < 0x100000000n) return 'ce' + be(n, 4)
    return 'cf' + be(n, 8)
  }
  const u = (size: number) => be(n + (1n << BigInt(8 * size)), size)
  if (n >= -32n) return u(1)
  if (n >= -128n) return 'd0' + u(1)
  if (n >= -32768n) return 'd1' + u(2)
  if (n >= -2147483648n) return 'd2' + u(4)
  return 'd3' + u(8)
}

// The bytes a meta value is written as, from an envelope {meta: {v}}.
function metaValue(v: unknown): string {
  const h = hex(encodeEnvelope({ type: MessageType.Configuration, body: {}, meta: { v } }))
  // 83 a4 body 80 a4 meta 81 a1 v <value> a4 type 0c
  const prefix = '83' + 'a4626f6479' + '80' + 'a46d657461' + '81' + 'a176'
  const suffix = 'a474797065' + '0c'
  expect(h.startsWith(prefix) && h.endsWith(suffix), h).toBe(true)
  return h.slice(prefix.length, h.length - suffix.length)
}

describe('canonical encoding', () => {
  const cid = 'ac_1'

  it('writes keys in bytewise order at every level', () => {
    const meta = { kb: 1, ka: { kz: 1, ky: [{ kd: 1, kc: 2 }] }, '9': 1, '10': 2, '\u{1F600}': 1, '\uFF01': 2, é: 3 }
    const out = encodeEnvelope({ type: MessageType.Configuration, body: { device: 'd', clientVersion: 'v' }, meta })
    const at = (s: string) => {
      const k = new TextEncoder().encode(s)
      const pattern = (0xa0 + k.length).toString(16) + hex(k)
      const i = hex(out).indexOf(pattern)
      expect(i, s).toBeGreaterThanOrEqual(0)
      expect(hex(out).lastIndexOf(pattern), s).toBe(i)
      return i
    }
    const order = ['body', 'clientVersion', 'device', 'meta', '10', '9', 'ka', 'ky', 'kc', 'kd', 'kz', 'kb', 'é', '\uFF01', '\u{1F600}', 'type']
    const positions = order.map(at)
    expect(positions).toEqual([...positions].sort((x, y) => x - y))
    expect(['\u{1F600}', '\uFF01', 'é', '9', '10'].sort(compareBytewise)).toEqual(['10', '9', 'é', '\uFF01', '\u{1F600}'])
  })

  it('writes integers in their smallest form', () => {
    const cases = [0, 1, 127, 128, 255, 256, 65535, 65536, 2 ** 32 - 1, 2 ** 32, 2 ** 53 - 1]
    for (const n of [...cases, ...cases.map((c) => -c), -31, -32, -33, -127, -128, -129, -32768, -32769, -(2 ** 31), -(2 ** 31) - 1]) {
      expect(metaValue(n), String(n)).toBe(intBytes(BigInt(n)))
    }
    for (const n of [2n ** 53n, 2n ** 63n, 2n ** 64n - 1n, -(2n ** 53n), -(2n ** 63n), 5n, -5n, 2n ** 32n]) {
      expect(metaValue(n), String(n)).toBe(intBytes(n))
    }
    expect(() => metaValue(2n ** 64n)).toThrow(ProtocolError)
    expect(() => metaValue(-(2n ** 63n) - 1n)).toThrow(ProtocolError)
  })

  it('writes integral numbers as integers and others as float64', () => {
    const f64 = (x: number) => {
      const b = new Uint8Array(9)
      b[0] = 0xcb
      new DataView(b.buffer).setFloat64(1, x)
      return hex(b)
    }
    expect(metaValue(1.0)).toBe('01')
    expect(metaValue(-0)).toBe('00')
    expect(metaValue(0.5)).toBe(f64(0.5))
    expect(metaValue(0.1)).toBe(f64(0.1))
    expect(metaValue(-1.25e-7)).toBe(f64(-1.25e-7))
    expect(metaValue(2 ** 53)).toBe(f64(2 ** 53)) // beyond 2^53-1: float64
    expect(metaValue(1e300)).toBe(f64(1e300))
    for (const bad of [NaN, Infinity, -Infinity]) expect(protocolError(() => metaValue(bad)).code).toBe(ErrorCode.Malformed)
    // In a number field too.
    const trace = (relevance: number) =>
      hex(encodeEnvelope(makeEnvelope(MessageType.MemoryTrace, { id: 'i', messageId: 'm', conversationId: cid, memoryId: 'x', content: 'c', relevance })))
    expect(trace(1)).toContain('a9relevance'.replace('relevance', hex(new TextEncoder().encode('relevance'))) + '01')
    expect(trace(0.75)).toContain(f64(0.75))
  })

  it('refuses numbers an integer field cannot hold', () => {
    const e = protocolError(() => encodeEnvelope(makeEnvelope(MessageType.AssistantSentence, { previousId: 'p', conversationId: cid, sequence: 1.5, text: 't' })))
    expect(e.code).toBe(ErrorCode.InvalidBody)
    expect(e.reason).toBe('body/sequence: got number, want integer')
    const min = protocolError(() => encodeEnvelope(makeEnvelope(MessageType.AssistantSentence, { previousId: 'p', conversationId: cid, sequence: 0, text: 't' })))
    expect(min.reason).toBe('body/sequence: minimum: got 0, want 1')
  })

  it('writes bytes fields as bin and nothing else', () => {
    const sentence = (audio: unknown) =>
      encodeEnvelope({ type: MessageType.AssistantSentence, body: { previousId: 'p', conversationId: cid, sequence: 1, text: 't', audio } })
    const audioKey = 'a5' + hex(new TextEncoder().encode('audio'))
    expect(hex(sentence(new Uint8Array([1, 2, 3])))).toContain(audioKey + 'c403010203')
    expect(hex(sentence(new Uint8Array(256)))).toContain(audioKey + 'c50100')
    expect(hex(sentence(new Uint8Array(70000)))).toContain(audioKey + 'c600011170')
    // An empty optional bytes field is left out, like an absent one.
    expect(hex(sentence(new Uint8Array(0)))).not.toContain(audioKey)
    expect(hex(sentence(undefined))).toBe(hex(sentence(null)))
    expect(protocolError(() => sentence('AQID')).reason).toBe('body/audio: got string, want Uint8Array')
    expect(protocolError(() => sentence([1, 2, 3])).code).toBe(ErrorCode.InvalidBody)
    // bin is invalid anywhere else.
    expect(protocolError(() => metaValue(new Uint8Array(1))).code).toBe(ErrorCode.Malformed)
    expect(protocolError(() => encodeEnvelope({ type: MessageType.UserMessage, body: { id: 'i', conversationId: cid, content: new Uint8Array(1) } })).code).toBe(
      ErrorCode.InvalidBody,
    )
  })

  it('leaves out absent optionals and empty optional arrays and maps, keeps required ones', () => {
    const base = { type: MessageType.Configuration, body: {} }
    expect(hex(encodeEnvelope(base))).toBe('82a4626f647980a474797065' + '0c')
    expect(hex(encodeEnvelope({ ...base, body: { features: [] } }))).toBe(hex(encodeEnvelope(base)))
    expect(hex(encodeEnvelope({ ...base, body: { features: undefined, device: null } }))).toBe(hex(encodeEnvelope(base)))
    expect(hex(encodeEnvelope({ ...base, stanzaId: 0, conversationId: '', meta: {} }))).toBe(hex(encodeEnvelope(base)))
    // An empty optional string or false is a value, not absence.
    expect(hex(encodeEnvelope({ ...base, body: { device: '' } }))).toContain('a6' + hex(new TextEncoder().encode('device')) + 'a0')
    const cfg = { name: 'n', action: 'upsert' as const }
    expect(hex(encodeEnvelope(makeEnvelope('MCPServerConfig', { ...cfg, env: {}, args: [] })))).toBe(hex(encodeEnvelope(makeEnvelope('MCPServerConfig', cfg))))
    // Required empty maps and arrays are written.
    const req = encodeEnvelope(
      makeEnvelope(MessageType.ToolUseRequest, { id: 'i', messageId: 'm', conversationId: cid, toolName: 't', parameters: {}, execution: 'server' }),
    )
    expect(hex(req)).toContain('aa' + hex(new TextEncoder().encode('parameters')) + '80')
    // Nil inside free-form values is a value.
    expect(metaValue(null)).toBe('c0')
    expect(metaValue({ a: null, b: undefined })).toBe('81a161c0')
    expect(metaValue([null, undefined])).toBe('92c0c0')
  })

  it('refuses what the schema does not allow', () => {
    const body = { id: 'i', conversationId: cid, content: 'c' }
    const e = (b: unknown) => protocolError(() => encodeEnvelope({ type: MessageType.UserMessage, body: b }))
    expect(e({ ...body, id: null }).reason).toBe('body/id: got null, want string')
    expect(e({ conversationId: cid, content: 'c' }).reason).toBe('body: missing required property "id"')
    expect(e({ ...body, extra: 1 }).reason).toBe('body/extra: not a property of the schema')
    expect(e({ ...body, content: 'a\uD800b' }).code).toBe(ErrorCode.InvalidBody)
    const stop = protocolError(() => encodeEnvelope({ type: MessageType.ControlStop, body: { conversationId: cid, stopType: 'everything' } }))
    expect(stop.reason).toBe('body/stopType: value "everything" is not one of ["generation","speech","all"]')
    expect(protocolError(() => encodeEnvelope({ type: 19, body: {} })).code).toBe(ErrorCode.UnknownType)
    expect(protocolError(() => encodeEnvelope({ type: 2, body: body, stanzaId: 2 ** 31 })).code).toBe(ErrorCode.Malformed)
    expect(protocolError(() => encodeEnvelope({ type: MessageType.Configuration, body: {}, meta: { big: 'x'.repeat(MAX_ENVELOPE_SIZE) } })).code).toBe(
      ErrorCode.TooLarge,
    )
  })
})

describe('decoding', () => {
  const raw = new Encoder({ useBigInt64: true })
  const user = { id: 'am_1', conversationId: 'ac_1', content: 'hi' }

  it('accepts non-canonical MessagePack that means the same', () => {
    const canonical = encodeEnvelope({ type: 2, stanzaId: 3, body: user })
    // Unsorted keys, uint64 and float forms for small integers, an unknown key, nils.
    const loose = raw.encode({ type: 2n, body: { content: 'hi', id: 'am_1', conversationId: 'ac_1', previousId: null, future: 1 }, stanzaId: 3.0, meta: null, conversationId: null })
    expect(hex(loose)).not.toBe(hex(canonical))
    expect(decodeEnvelope(loose)).toEqual(decodeEnvelope(canonical))
    expect(hex(encodeEnvelope(decodeEnvelope(loose)))).toBe(hex(canonical))
    const f32 = new Encoder({ forceFloat32: true }).encode({ type: 14, body: { id: 'i', messageId: 'm', conversationId: 'c', memoryId: 'x', content: 'c', relevance: 0.5 } })
    expect(decodeEnvelope(f32).body).toMatchObject({ relevance: 0.5 })
  })

  it('takes an ArrayBuffer as a WebSocket gives it', () => {
    const wire = encodeEnvelope({ type: 2, body: user })
    expect(decodeEnvelope(wire.buffer.slice(wire.byteOffset, wire.byteOffset + wire.byteLength))).toEqual(decodeEnvelope(wire))
  })

  it('reads bytes as a Uint8Array of its own', () => {
    const wire = encodeEnvelope({ type: 4, body: { conversationId: 'c', format: 'f', sequence: 1, durationMs: 1, data: new Uint8Array([9, 8, 7]) } })
    const env = decodeEnvelope(wire)
    expect(isEnvelopeOf(env, MessageType.AudioChunk)).toBe(true)
    if (!isEnvelopeOf(env, MessageType.AudioChunk)) return
    expect(env.body.data).toBeInstanceOf(Uint8Array)
    expect(Array.from(env.body.data ?? [])).toEqual([9, 8, 7])
    wire.fill(0)
    expect(Array.from(env.body.data ?? [])).toEqual([9, 8, 7])
    // str in a bytes field, bin elsewhere: 103.
    expect(protocolError(() => decodeEnvelope(raw.encode({ type: 4, body: { conversationId: 'c', format: 'f', sequence: 1, durationMs: 1, data: 'CQgH' } }))).reason).toBe(
      'body/data: must be MessagePack bin',
    )
    expect(protocolError(() => decodeEnvelope(raw.encode({ type: 2, body: { ...user, content: new Uint8Array(1) } }))).code).toBe(ErrorCode.InvalidBody)
    expect(protocolError(() => decodeEnvelope(raw.encode({ type: 2, body: user, meta: { b: new Uint8Array(1) } }))).code).toBe(ErrorCode.Malformed)
  })

  it('keeps integers beyond 2^53-1 in free-form values as bigints', () => {
    const env = decodeEnvelope(encodeEnvelope({ type: 12, body: {}, meta: { big: 2n ** 60n, neg: -(2n ** 60n), small: 7n } }))
    expect(env.meta).toEqual({ big: 2n ** 60n, neg: -(2n ** 60n), small: 7 })
  })

  const cases: [string, Uint8Array, number, string?][] = [
    ['empty input', new Uint8Array(0), ErrorCode.Malformed],
    ['not a map', raw.encode([1, 2]), ErrorCode.Malformed, 'envelope is not a MessagePack map'],
    ['trailing bytes', new Uint8Array([...raw.encode({ type: 2, body: user }), 0xc0]), ErrorCode.Malformed],
    ['truncated', raw.encode({ type: 2, body: user }).subarray(0, 20), ErrorCode.Malformed],
    ['invalid code', new Uint8Array([0x81, 0xa1, 0x61, 0xc1]), ErrorCode.Malformed],
    ['forged length', new Uint8Array([0xdd, 0xff, 0xff, 0xff, 0xff]), ErrorCode.Malformed],
    ['no type', raw.encode({ body: user }), ErrorCode.Malformed, 'envelope has no type'],
    ['no body', raw.encode({ type: 2 }), ErrorCode.Malformed, 'envelope has no body'],
    ['type of the wrong kind', raw.encode({ type: '2', body: user }), ErrorCode.Malformed, 'type must be an integer'],
    ['type out of range', raw.encode({ type: 70000, body: user }), ErrorCode.Malformed],
    ['body not a map', raw.encode({ type: 2, body: [] }), ErrorCode.Malformed, 'body must be a map'],
    ['stanzaId out of range', raw.encode({ type: 2, body: user, stanzaId: 2 ** 31 }), ErrorCode.Malformed],
    ['meta not a map', raw.encode({ type: 2, body: user, meta: 'x' }), ErrorCode.Malformed, 'meta must be a map'],
    ['unknown type', raw.encode({ type: 19, body: {} }), ErrorCode.UnknownType, 'unknown message type 19'],
    ['unassigned type', raw.encode({ type: 19, body: {} }), ErrorCode.UnknownType],
    ['missing required field', raw.encode({ type: 2, body: { id: 'i', content: 'c' } }), ErrorCode.InvalidBody, 'body: missing required property "conversationId"'],
    ['required field nil', raw.encode({ type: 2, body: { ...user, id: null } }), ErrorCode.InvalidBody, 'body/id: got null, want string'],
    ['wrong field type', raw.encode({ type: 2, body: { ...user, timestamp: 'now' } }), ErrorCode.InvalidBody, 'body/timestamp: got string, want integer'],
    ['enum', raw.encode({ type: 10, body: { conversationId: 'c', stopType: 'x' } }), ErrorCode.InvalidBody],
    ['nil array item', raw.encode({ type: 12, body: { features: [null] } }), ErrorCode.InvalidBody, 'body/features/0: got null, want string'],
    ['nil in a typed map', raw.encode({ type: 62, body: { name: 'n', action: 'upsert', env: { A: null } } }), ErrorCode.InvalidBody, 'body/env/A: got null, want string'],
    ['extension type', raw.encode({ type: 2, body: { ...user, content: new Date(0) } }), ErrorCode.InvalidBody],
    ['extension in meta', raw.encode({ type: 2, body: user, meta: { t: new Date(0) } }), ErrorCode.Malformed],
    ['too large', new Uint8Array(MAX_ENVELOPE_SIZE + 1), ErrorCode.TooLarge],
  ]
  it.each(cases)('refuses %s', (_, data, code, reason) => {
    const e = protocolError(() => decodeEnvelope(data))
    expect(e.code).toBe(code)
    if (reason) expect(e.reason).toBe(reason)
  })

  // Hand-made bytes for what no encoder writes.
  const map = (...kv: Uint8Array[]) => new Uint8Array([0x80 + kv.length / 2, ...kv.flatMap((x) => Array.from(x))])
  const s = (x: string) => raw.encode(x)
  const body = (...kv: Uint8Array[]) => map(s('body'), map(...kv), s('type'), raw.encode(2))
  const good = [s('id'), s('i'), s('conversationId'), s('c'), s('content'), s('x')]

  it('refuses malformed bodies with 103 and malformed headers with 101', () => {
    expect(decodeEnvelope(body(...good)).body).toEqual({ id: 'i', conversationId: 'c', content: 'x' })
    const badUTF8 = new Uint8Array([0xa2, 0xc3, 0x28])
    expect(protocolError(() => decodeEnvelope(body(...good.slice(0, 4), s('content'), badUTF8))).reason).toBe('body/content: string is not valid UTF-8')
    expect(protocolError(() => decodeEnvelope(body(...good, s('id'), s('j')))).reason).toBe('body/id: duplicate key')
    expect(protocolError(() => decodeEnvelope(body(...good, raw.encode(1), s('j')))).code).toBe(ErrorCode.InvalidBody)
    const dupHeader = map(s('type'), raw.encode(2), s('body'), map(...good), s('type'), raw.encode(2))
    expect(protocolError(() => decodeEnvelope(dupHeader)).reason).toBe('duplicate envelope field type')
    const badCid = map(s('type'), raw.encode(2), s('body'), map(...good), s('conversationId'), badUTF8)
    expect(protocolError(() => decodeEnvelope(badCid)).code).toBe(ErrorCode.Malformed)
    // Maps and arrays nest at most 32 deep, the envelope included (as pkg/protocol checks).
    const nest = (n: number) => {
      let d: unknown = 1
      for (let i = 0; i < n; i++) d = [d]
      return d
    }
    const ok = { type: 2, body: user, meta: { deep: nest(30) } }
    expect(decodeEnvelope(raw.encode(ok)).meta).toEqual({ deep: nest(30) })
    expect(decodeEnvelope(encodeEnvelope(ok)).meta).toEqual({ deep: nest(30) })
    const tooDeep = { type: 2, body: user, meta: { deep: nest(31) } }
    expect(protocolError(() => decodeEnvelope(raw.encode(tooDeep))).code).toBe(ErrorCode.Malformed)
    expect(protocolError(() => encodeEnvelope(tooDeep)).code).toBe(ErrorCode.Malformed)
    expect(protocolError(() => encodeEnvelope({ type: 7, body: { id: 'r', requestId: 'q', conversationId: 'c', success: true, result: nest(31) } })).code).toBe(
      ErrorCode.InvalidBody,
    )
  })

  it('reads nil optionals as absent at every depth, and keeps nil in free-form values', () => {
    const wire = raw.encode({
      type: 24,
      body: { id: 'm', action: 'create', timestamp: 1, memory: { content: 'c', tags: null, id: null, importance: null } },
      meta: { keep: null },
    })
    const env = decodeEnvelope(wire)
    expect(env.body).toEqual({ id: 'm', action: 'create', timestamp: 1, memory: { content: 'c' } })
    expect(env.meta).toEqual({ keep: null })
    expect(Object.keys(env.body as object)).toEqual(['action', 'id', 'memory', 'timestamp'])
  })
})

describe('helpers', () => {
  it('makeEnvelope types the body by type number or name', () => {
    const body: UserMessage = { id: 'am_1', conversationId: 'ac_1', content: 'hi' }
    const a = makeEnvelope(MessageType.UserMessage, body, { stanzaId: 1, conversationId: 'ac_1' })
    const b = makeEnvelope('UserMessage', body, { stanzaId: 1, conversationId: 'ac_1' })
    expect(a).toEqual({ type: 2, stanzaId: 1, conversationId: 'ac_1', body })
    expect(b).toEqual(a)
    // @ts-expect-error: the body must be the type's.
    makeEnvelope(MessageType.UserMessage, { id: 'x' })
  })

  it('knows names, client types and JSON', () => {
    expect(messageTypeName(16)).toBe('AssistantSentence')
    expect(messageTypeName(19)).toBeUndefined()
    expect(clientMaySend(MessageType.UserMessage)).toBe(true)
    expect(clientMaySend(MessageType.AssistantSentence)).toBe(false)
    expect(CLIENT_TYPES.has(MessageType.Feedback)).toBe(true)
    const env = makeEnvelope(MessageType.AudioChunk, { conversationId: 'c', format: 'f', sequence: 1, durationMs: 2, data: new Uint8Array([0, 255]) })
    expect(envelopeToJSON(env)).toEqual({ type: 4, body: { conversationId: 'c', data: 'AP8=', durationMs: 2, format: 'f', sequence: 1 } })
    expect(envelopeFromJSON(JSON.parse(JSON.stringify(envelopeToJSON(env))))).toEqual(env)
    expect(protocolError(() => envelopeFromJSON({ type: 4, body: { conversationId: 'c', format: 'f', sequence: 1, durationMs: 2, data: 'AP8' } })).reason).toBe(
      'body/data: not padded standard base64',
    )
  })
})

// A deterministic pseudo-random generator (mulberry32).
function rng(seed: number) {
  let a = seed
  return () => {
    a = (a + 0x6d2b79f5) | 0
    let t = Math.imul(a ^ (a >>> 15), 1 | a)
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
}

describe('properties', () => {
  const rand = rng(42)
  const pick = <T>(xs: readonly T[]): T => xs[Math.floor(rand() * xs.length)]!
  const chars = ['a', 'Z', '0', '9', '_', 'é', 'ß', '€', '\uFF01', '\u{1F600}', '\u{10FFFF}', ' ', '\u0000']
  const str = () => Array.from({ length: Math.floor(rand() * 6) }, () => pick(chars)).join('')
  const num = (): number | bigint => {
    switch (Math.floor(rand() * 6)) {
      case 0:
        return Math.floor(rand() * 256) - 128
      case 1:
        return Math.floor((rand() - 0.5) * 2 ** 40)
      case 2:
        return Math.floor((rand() - 0.5) * 2 * Number.MAX_SAFE_INTEGER)
      case 3:
        return (rand() - 0.5) * 1e6
      case 4:
        return BigInt(Math.floor(rand() * 2 ** 30)) * 2n ** 33n + 2n ** 53n
      default:
        return pick([0, -1, 2 ** 32, -(2 ** 31), -(2 ** 31) - 1, 2 ** 32 - 1, 0.5, 1e21])
    }
  }
  const value = (depth: number): unknown => {
    const k = Math.floor(rand() * (depth > 3 ? 4 : 6))
    if (k === 0) return str()
    if (k === 1) return num()
    if (k === 2) return pick([true, false, null])
    if (k === 3) return str()
    if (k === 4) return Array.from({ length: Math.floor(rand() * 4) }, () => value(depth + 1))
    return Object.fromEntries(Array.from({ length: Math.floor(rand() * 5) }, () => [str(), value(depth + 1)]))
  }

  it('encode and decode are inverse, and the bytes are canonical', () => {
    const plain = new Decoder({ useBigInt64: true })
    for (let i = 0; i < 300; i++) {
      const meta = Object.fromEntries(Array.from({ length: 1 + Math.floor(rand() * 6) }, () => [str() || 'k', value(0)]))
      const env: Envelope = {
        type: MessageType.ToolUseResult,
        stanzaId: Math.floor((rand() - 0.5) * 2 ** 32) || 1,
        conversationId: 'ac_' + str(),
        meta,
        body: { id: 'r', requestId: 'q', conversationId: 'c', success: rand() < 0.5, result: value(0) },
      }
      const wire = encodeEnvelope(env)
      const back = decodeEnvelope(wire)
      expect(hex(encodeEnvelope(back))).toBe(hex(wire))
      // The library reads the bytes back to the same values (keys aside from order).
      expect(plain.decode(wire)).toBeTypeOf('object')
      // Keys are in bytewise order: re-encoding from shuffled key order gives the same bytes.
      const shuffled = JSON.parse(JSON.stringify(envelopeToJSON(back)), (_, v: unknown) =>
        v && typeof v === 'object' && !Array.isArray(v) ? Object.fromEntries(Object.entries(v).reverse()) : v,
      ) as unknown
      if (!hasBig(meta) && !hasBig(env.body)) {
        expect(hex(encodeEnvelope(envelopeFromJSON(shuffled)))).toBe(hex(wire))
      }
    }
  })
})

function hasBig(v: unknown): boolean {
  if (typeof v === 'bigint') return true
  if (typeof v === 'number') return Number.isInteger(v) && !Number.isSafeInteger(v)
  if (Array.isArray(v)) return v.some(hasBig)
  if (v && typeof v === 'object') return Object.values(v).some(hasBig)
  return false
}
