// The Alicia wire protocol for the web client: generated types (one
// interface per message body, MessageType, BodyByType, CLIENT_TYPES) and the
// canonical MessagePack / JSON codec. Regenerate the types with `npm run gen`
// after a change in proto-schemas/.
export * from './types.gen'
export { BODY_SHAPES } from './shapes.gen'
export type { ObjectShape, Shape } from './shape'
export { ErrorCode, MAX_ENVELOPE_SIZE, ProtocolError, type ErrorCodeNumber } from './errors'
export {
  base64ToBytes,
  bytesToBase64,
  clientMaySend,
  compareBytewise,
  decodeEnvelope,
  encodeEnvelope,
  envelopeFromJSON,
  envelopeToJSON,
  isEnvelopeOf,
  makeEnvelope,
  messageTypeName,
  type AnyEnvelope,
  type Envelope,
  type EnvelopeOptions,
  type TypedEnvelope,
} from './codec'
