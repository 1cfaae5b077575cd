import { describe, expect, it } from 'vitest'
import { wakeWordName } from './wake'

describe('wakeWordName', () => {
  it('names the first wake word as the page says it', () => {
    expect(wakeWordName(['alicia', 'computer'])).toBe('Alicia')
    expect(wakeWordName(['hey computer'])).toBe('Hey Computer')
    expect(wakeWordName(['', 'álvaro'])).toBe('Álvaro')
  })
  it('falls back to Alicia when server-info lists none', () => {
    expect(wakeWordName(undefined)).toBe('Alicia')
    expect(wakeWordName([])).toBe('Alicia')
  })
})
