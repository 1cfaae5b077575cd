// What @msgpack/msgpack's decoder does not check, checked before it runs:
// that the input is one complete MessagePack value without trailing bytes,
// nested at most MAX_DEPTH deep, with string map keys only, no duplicate
// keys, valid UTF-8 in every string and no extension types (the library
// replaces invalid UTF-8 silently, keeps the last of duplicate keys, accepts
// integer keys and turns extension -1 into a Date). Mirrors pkg/protocol's
// checkWellFormed and reader.
import { ErrorCode, ProtocolError } from './errors'

export const MAX_DEPTH = 32

const utf8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true })

const HEADER_KEYS = new Set(['stanzaId', 'conversationId', 'type', 'meta', 'body'])

// checkWellFormed throws a ProtocolError (101) when data is not one
// well-formed MessagePack value, or when the envelope's header (everything
// but the value of the top-level "body" key) breaks the rules above. A body
// breaking them is returned as a 103 error instead, for the caller to throw
// once the header has been checked (the order pkg/protocol reports errors in).
export function checkWellFormed(data: Uint8Array): ProtocolError | undefined {
  const view = new DataView(data.buffer, data.byteOffset, data.byteLength)
  let pos = 0
  const path: string[] = []
  let inBody = false
  let headerError: ProtocolError | undefined
  let bodyError: ProtocolError | undefined

  const malformed = (msg: string): never => {
    throw new ProtocolError(ErrorCode.Malformed, msg)
  }
  // A problem with the meaning, not the structure: the first one is kept and
  // scanning goes on, so structural errors later on still win.
  const invalid = (msg: string): void => {
    const where = path.length ? path.join('/') + ': ' : ''
    if (inBody) bodyError ??= new ProtocolError(ErrorCode.InvalidBody, where + msg)
    else headerError ??= new ProtocolError(ErrorCode.Malformed, where + msg)
  }
  const need = (n: number): void => {
    if (n > data.length - pos) malformed(`truncated at byte ${pos}: ${n} more bytes declared, ${data.length - pos} left`)
  }
  const length = (n: 1 | 2 | 4): number => {
    need(n)
    const v = n === 1 ? view.getUint8(pos) : n === 2 ? view.getUint16(pos) : view.getUint32(pos)
    pos += n
    return v
  }
  const skip = (n: number): void => {
    need(n)
    pos += n
  }
  const string = (n: number): string | undefined => {
    need(n)
    const start = pos
    pos += n
    try {
      return utf8.decode(data.subarray(start, start + n))
    } catch {
      invalid('string is not valid UTF-8')
      return undefined
    }
  }
  // Every value takes at least one byte: a count larger than what remains
  // cannot be right (and would make the library allocate for nothing).
  const count = (n: number, perItem: number): number => {
    if (n * perItem > data.length - pos) malformed(`container at byte ${pos} declares ${n} values, ${data.length - pos} bytes left`)
    return n
  }

  function container(depth: number): void {
    if (depth + 1 > MAX_DEPTH) malformed(`nested more than ${MAX_DEPTH} deep`)
  }

  function array(n: number, depth: number): void {
    container(depth)
    count(n, 1)
    for (let i = 0; i < n; i++) {
      path.push(String(i))
      value(depth + 1)
      path.pop()
    }
  }

  function map(n: number, depth: number): void {
    container(depth)
    count(n, 2)
    const seen = new Set<string>()
    for (let i = 0; i < n; i++) {
      need(1)
      const c = data[pos]!
      let key: string | undefined
      if ((c >= 0xa0 && c <= 0xbf) || c === 0xd9 || c === 0xda || c === 0xdb) {
        pos++
        key = string(c <= 0xbf ? c & 0x1f : length(c === 0xd9 ? 1 : c === 0xda ? 2 : 4))
        if (key === '__proto__') invalid('the map key __proto__ is not supported')
      } else {
        invalid(`map key is not a string (0x${c.toString(16).padStart(2, '0')})`)
        value(depth + 1)
      }
      const top = depth === 0
      if (key !== undefined && seen.has(key)) {
        if (!top) {
          path.push(key)
          invalid('duplicate key')
          path.pop()
        } else if (HEADER_KEYS.has(key)) {
          const was = inBody
          inBody = false
          invalid(`duplicate envelope field ${key}`)
          inBody = was
        }
      }
      if (key !== undefined) seen.add(key)
      path.push(key ?? '?')
      const wasInBody = inBody
      if (top) inBody = key === 'body'
      value(depth + 1)
      inBody = wasInBody
      path.pop()
    }
  }

  function value(depth: number): void {
    need(1)
    const c = data[pos++]!
    if (c <= 0x7f || c >= 0xe0 || c === 0xc0 || c === 0xc2 || c === 0xc3) return
    if (c <= 0x8f) return map(c & 0x0f, depth)
    if (c <= 0x9f) return array(c & 0x0f, depth)
    if (c <= 0xbf) {
      string(c & 0x1f)
      return
    }
    switch (c) {
      case 0xcc:
      case 0xd0:
        return skip(1)
      case 0xcd:
      case 0xd1:
        return skip(2)
      case 0xca:
      case 0xce:
      case 0xd2:
        return skip(4)
      case 0xcb:
      case 0xcf:
      case 0xd3:
        return skip(8)
      case 0xc4:
        return skip(length(1))
      case 0xc5:
        return skip(length(2))
      case 0xc6:
        return skip(length(4))
      case 0xd9:
        string(length(1))
        return
      case 0xda:
        string(length(2))
        return
      case 0xdb:
        string(length(4))
        return
      case 0xdc:
        return array(length(2), depth)
      case 0xdd:
        return array(length(4), depth)
      case 0xde:
        return map(length(2), depth)
      case 0xdf:
        return map(length(4), depth)
      case 0xd4:
      case 0xd5:
      case 0xd6:
      case 0xd7:
      case 0xd8:
        skip(1 + (1 << (c - 0xd4)))
        return invalid(`unsupported MessagePack type 0x${c.toString(16)} (extension)`)
      case 0xc7:
      case 0xc8:
      case 0xc9:
        skip(length(c === 0xc7 ? 1 : c === 0xc8 ? 2 : 4) + 1)
        return invalid(`unsupported MessagePack type 0x${c.toString(16)} (extension)`)
      default:
        return malformed(`invalid MessagePack code 0x${c.toString(16)} at byte ${pos - 1}`)
    }
  }

  if (data.length === 0) malformed('envelope is not a MessagePack map')
  value(0)
  if (pos !== data.length) malformed(`${data.length - pos} trailing bytes after the envelope`)
  if (headerError) throw headerError
  return bodyError
}
