// Protocol error codes (proto-schemas/README.md, "Error codes when decoding"),
// the same numbers pkg/protocol uses.
export const ErrorCode = {
  // Not a well-formed MessagePack map, trailing bytes, a header field of the
  // wrong type or out of range, missing type or body, duplicate header keys,
  // a meta value that is not JSON.
  Malformed: 101,
  // A type number no schema defines.
  UnknownType: 102,
  // The body does not match its schema; the reason names the field.
  InvalidBody: 103,
  // Larger than MAX_ENVELOPE_SIZE.
  TooLarge: 104,
} as const

export type ErrorCodeNumber = (typeof ErrorCode)[keyof typeof ErrorCode]

// The largest envelope, encoded, that the codec writes or reads (1 MiB).
export const MAX_ENVELOPE_SIZE = 1 << 20

// ProtocolError is what encodeEnvelope, decodeEnvelope and envelopeFromJSON
// throw for anything the protocol refuses. reason names the field, e.g.
// "body/sequence: minimum: got 0, want 1".
export class ProtocolError extends Error {
  readonly code: ErrorCodeNumber
  readonly reason: string

  constructor(code: ErrorCodeNumber, reason: string) {
    super(`protocol error ${code}: ${reason}`)
    this.name = 'ProtocolError'
    this.code = code
    this.reason = reason
  }
}
