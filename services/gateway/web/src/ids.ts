// Ids as the protocol makes them: a prefix, "_" and 20 base62 characters.
const ALPHABET = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz'

export function newId(prefix: string): string {
  const bytes = new Uint8Array(20)
  crypto.getRandomValues(bytes)
  let out = prefix + '_'
  for (const b of bytes) out += ALPHABET[b % 62]
  return out
}
