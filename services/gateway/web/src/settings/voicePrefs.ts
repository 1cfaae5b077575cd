// Voices and languages (issue 30, item 2): the person's defaults
// (GET/PUT /v1/settings) and a conversation's own (PUT
// /v1/conversations/{id}/preferences; what applies is in
// GET /v1/conversations/{id}'s preferences), and the labels the pages show
// for voices, languages and time zones.
import type * as Rest from '../rest.gen'

export type UserSettings = Rest.UserSettings
export type ConversationPreferences = Rest.ConversationPreferences
export type EffectivePreferences = Rest.EffectivePreferences
export interface Voice {
  id: string
  name?: string
  language?: string
}

async function call<T>(method: string, path: string, body?: unknown): Promise<T> {
  const res = await fetch(path, {
    method,
    credentials: 'same-origin',
    headers: body === undefined ? { Accept: 'application/json' } : { Accept: 'application/json', 'Content-Type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  })
  const data = (await res.json().catch(() => undefined)) as (T & { error?: { message?: string } }) | undefined
  if (!res.ok) throw new Error(data?.error?.message ?? `${res.status} ${res.statusText}`)
  return data as T
}

export const voicePrefs = {
  settings: () => call<UserSettings>('GET', '/v1/settings'),
  putSettings: (s: UserSettings) => call<UserSettings>('PUT', '/v1/settings', s),
  conversation: async (cid: string) =>
    (await call<{ preferences?: EffectivePreferences }>('GET', `/v1/conversations/${encodeURIComponent(cid)}`)).preferences,
  putConversation: (cid: string, p: ConversationPreferences) =>
    call<EffectivePreferences>('PUT', `/v1/conversations/${encodeURIComponent(cid)}/preferences`, p),
}

// Rates offered (the speech API's speed, 1 the voice's own).
export const MIN_RATE = 0.5
export const MAX_RATE = 2

// languageName is a BCP 47 tag in the page's language ("fr-FR" → "French (France)").
export function languageName(tag: string): string {
  try {
    return new Intl.DisplayNames(undefined, { type: 'language' }).of(tag) ?? tag
  } catch {
    return tag
  }
}

// voiceLabel names a voice for people: its name and language when the
// engine gives them, its id otherwise.
export function voiceLabel(v: Voice): string {
  const name = v.name || v.id
  return v.language ? `${name} (${languageName(v.language)})` : name
}

// languages are the tags both engines take, speech's first, without
// duplicates, sorted by name; a transcription-only language is offered too
// (the answer is then spoken by a voice of another language).
export function languages(asr: string[] | undefined, tts: string[] | undefined): string[] {
  const all = [...new Set([...(tts ?? []), ...(asr ?? [])])]
  return all.sort((a, b) => languageName(a).localeCompare(languageName(b)))
}

// browserZone is the browser's IANA time zone.
export function browserZone(): string {
  return Intl.DateTimeFormat().resolvedOptions().timeZone || 'UTC'
}

// timeZones are the zones the browser knows (the current one included).
export function timeZones(): string[] {
  const known = typeof Intl.supportedValuesOf === 'function' ? Intl.supportedValuesOf('timeZone') : []
  return [...new Set([...known, browserZone(), 'UTC'])].sort()
}

export function rateLabel(r: number): string {
  return `${r.toFixed(2).replace(/0$/, '')}×`
}
