// The wake word as the page names it (server-info's wakeWords; the first
// one, "alicia" when none): "alicia" → "Alicia".
export function wakeWordName(words: string[] | undefined): string {
  const w = words?.find((x) => x.trim() !== '') ?? 'alicia'
  return w.replace(/(^|\s)(\p{L})/gu, (_, sp: string, c: string) => sp + c.toUpperCase())
}
