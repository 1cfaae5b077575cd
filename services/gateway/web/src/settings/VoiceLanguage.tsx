// "Voice and language" on the settings page (issue 30, item 2): the person's
// defaults for every conversation - the voice answers are spoken in
// (server-info's voices), the speaking rate, the language speech is
// transcribed and spoken in, and the time zone times are read in (the
// browser's by default) - saved as their UserSettings. A conversation may
// set its own in the voice panel. Hands-free mode by default too.
import { useEffect, useState, type FormEvent } from 'react'
import type { ServerInfoJSON } from '../types'
import { browserZone, languageName, languages, MAX_RATE, MIN_RATE, rateLabel, timeZones, voiceLabel, voicePrefs, type UserSettings } from './voicePrefs'

// wakeName is how the page names the wake word: the first of server-info's.
function wakeName(info?: ServerInfoJSON): string {
  const w = info?.wakeWords?.[0] ?? 'alicia'
  return `“${w.charAt(0).toUpperCase()}${w.slice(1)}”`
}

const field = 'focus-ring w-full rounded border border-slate-300 bg-white px-2 py-1 dark:border-slate-700 dark:bg-slate-900'

export function VoiceLanguage({ info }: { info?: ServerInfoJSON }) {
  const [loaded, setLoaded] = useState(false)
  const [voice, setVoice] = useState('')
  const [rate, setRate] = useState(1)
  const [language, setLanguage] = useState('')
  const [zone, setZone] = useState(browserZone())
  const [wakeWord, setWakeWord] = useState<boolean | undefined>()
  const [state, setState] = useState<{ saving?: boolean; saved?: boolean; error?: string }>({})

  useEffect(() => {
    let live = true
    voicePrefs.settings().then(
      (s) => {
        if (!live) return
        setVoice(s.voice ?? '')
        setRate(s.speechSpeed ?? 1)
        setLanguage(s.language ?? '')
        setZone(s.timeZone ?? browserZone())
        setWakeWord(s.wakeWord)
        setLoaded(true)
      },
      (e: unknown) => live && setState({ error: e instanceof Error ? e.message : String(e) }),
    )
    return () => { live = false }
  }, [])

  async function save(e: FormEvent) {
    e.preventDefault()
    setState({ saving: true })
    const s: UserSettings = { speechSpeed: rate, timeZone: zone }
    if (voice) s.voice = voice
    if (language) s.language = language
    if (wakeWord !== undefined) s.wakeWord = wakeWord
    try {
      await voicePrefs.putSettings(s)
      setState({ saved: true })
    } catch (err) {
      setState({ error: err instanceof Error ? err.message : String(err) })
    }
  }

  const voices = info?.voices ?? []
  const langs = languages(info?.models.asr.languages, info?.models.tts.languages)
  if (language && !langs.includes(language)) langs.unshift(language)
  const installation = info?.models.tts.voice
  return (
    <form onSubmit={save} aria-labelledby="voice-language-title" data-testid="voice-language" className="space-y-3">
      <h2 id="voice-language-title" className="font-medium">Voice and language</h2>
      <p className="text-xs text-slate-600 dark:text-slate-400">Your defaults for every conversation; a conversation can set its own in the voice panel.</p>
      <div className="grid gap-3 text-sm sm:grid-cols-2">
        <label className="block">
          <span className="block">Voice</span>
          <select className={field} value={voice} onChange={(e) => setVoice(e.target.value)} disabled={!loaded}>
            <option value="">The installation's{installation ? ` (${installation})` : ''}</option>
            {voices.map((v) => <option key={v.id} value={v.id}>{voiceLabel(v)}</option>)}
          </select>
        </label>
        <label className="block">
          <span className="block">Speaking rate: <span data-testid="rate-value">{rateLabel(rate)}</span></span>
          <input type="range" min={MIN_RATE} max={MAX_RATE} step={0.05} value={rate} disabled={!loaded}
            onChange={(e) => setRate(Number(e.target.value))} className="focus-ring w-full" aria-valuetext={rateLabel(rate)} />
        </label>
        <label className="block">
          <span className="block">Language</span>
          <select className={field} value={language} onChange={(e) => setLanguage(e.target.value)} disabled={!loaded}>
            <option value="">Detected from what is said</option>
            {langs.map((l) => <option key={l} value={l}>{languageName(l)}</option>)}
          </select>
        </label>
        <label className="block">
          <span className="block">Time zone</span>
          <select className={field} value={zone} onChange={(e) => setZone(e.target.value)} disabled={!loaded}>
            {timeZones().map((z) => <option key={z} value={z}>{z.replaceAll('_', ' ')}</option>)}
          </select>
        </label>
      </div>
      <div className="flex items-start gap-2 text-sm">
        <input id="handsfree-default" type="checkbox" className="focus-ring mt-1" checked={wakeWord ?? false} disabled={!loaded}
          onChange={(e) => setWakeWord(e.target.checked)} data-testid="handsfree-default" aria-describedby="handsfree-default-help" />
        <span>
          <label htmlFor="handsfree-default">Hands-free by default</label>
          <span id="handsfree-default-help" className="block text-xs text-slate-600 dark:text-slate-400">
            In calls, Alicia answers only speech that starts with {wakeName(info)}; anything else you say is neither answered nor stored. A conversation can turn it on or off in the voice panel.
          </span>
        </span>
      </div>
      <div className="flex items-center gap-3 text-sm">
        <button type="submit" disabled={!loaded || state.saving} className="focus-ring rounded bg-indigo-600 px-3 py-1 text-white disabled:opacity-60">Save</button>
        {state.saved && <span role="status" className="text-emerald-700 dark:text-emerald-400">Saved: applies from the next sentence.</span>}
        {state.error && <span role="alert" className="text-red-700 dark:text-red-400">{state.error}</span>}
      </div>
    </form>
  )
}
