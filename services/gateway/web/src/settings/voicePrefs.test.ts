import { describe, expect, it } from 'vitest'
import { browserZone, languages, rateLabel, timeZones, voiceLabel } from './voicePrefs'

describe('voice and language choices', () => {
  it('offers both engines\' languages once, sorted by name', () => {
    const l = languages(['en', 'fr', 'de'], ['fr-FR', 'en-US', 'fr'])
    expect(new Set(l).size).toBe(l.length)
    expect(l).toEqual(expect.arrayContaining(['en', 'fr', 'de', 'fr-FR', 'en-US']))
    expect(l.indexOf('fr')).toBeLessThan(l.indexOf('de')) // French before German
    expect(languages(undefined, undefined)).toEqual([])
  })
  it('names a voice by its name and language, else its id', () => {
    expect(voiceLabel({ id: 'bf_emma', name: 'Emma', language: 'en-GB' })).toMatch(/^Emma \(.*English.*\)$/)
    expect(voiceLabel({ id: 'en-us' })).toBe('en-us')
  })
  it('shows rates as multiples', () => {
    expect(rateLabel(1)).toBe('1.0×')
    expect(rateLabel(1.25)).toBe('1.25×')
    expect(rateLabel(0.5)).toBe('0.5×')
  })
  it('offers the browser\'s time zone', () => {
    expect(timeZones()).toContain(browserZone())
    expect(timeZones()).toContain('UTC')
  })
})
