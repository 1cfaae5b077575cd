// This conversation's voice, speaking rate and language, in the voice panel
// (issue 30, item 2): each change is the conversation's own Configuration
// (PUT /v1/conversations/{id}/preferences), spoken from the next sentence
// and transcribed from the next utterance; "Your default" goes back to the
// person's settings.
import { useEffect, useState } from 'react'
import { useApp } from '../store/app'
import { languageName, languages, MAX_RATE, MIN_RATE, rateLabel, voiceLabel, voicePrefs, type ConversationPreferences, type EffectivePreferences } from '../settings/voicePrefs'

const RATES = [0.75, 0.9, 1, 1.1, 1.25, 1.5].filter((r) => r >= MIN_RATE && r <= MAX_RATE)
const select = 'focus-ring max-w-44 rounded border border-slate-300 bg-white px-1 py-0.5 dark:border-slate-700 dark:bg-slate-950'

export function VoicePreferences({ conversationId, disabled }: { conversationId?: string; disabled?: boolean }) {
  const info = useApp((s) => s.serverInfo)
  const [eff, setEff] = useState<EffectivePreferences>()
  const [error, setError] = useState<string>()

  useEffect(() => {
    if (!conversationId) return
    let live = true
    voicePrefs.conversation(conversationId).then((p) => live && setEff(p), () => {})
    return () => { live = false }
  }, [conversationId])

  async function change(p: ConversationPreferences) {
    if (!conversationId) return
    setError(undefined)
    try {
      setEff(await voicePrefs.putConversation(conversationId, p))
    } catch (e) {
      setError(e instanceof Error ? e.message : String(e))
    }
  }

  const own = (from?: string) => from === 'conversation'
  const voices = info?.voices ?? []
  const langs = languages(info?.models.asr.languages, info?.models.tts.languages)
  const lang = own(eff?.languageFrom) ? eff?.language ?? '' : ''
  if (lang && !langs.includes(lang)) langs.unshift(lang)
  const rate = own(eff?.speechSpeedFrom) ? eff?.speechSpeed ?? 0 : 0
  const off = disabled || !eff
  return (
    <div role="group" aria-label="This conversation's voice" data-testid="voice-preferences" className="mt-1 flex flex-wrap items-center gap-2">
      <label className="flex items-center gap-1">
        <span>Voice</span>
        <select className={select} value={own(eff?.voiceFrom) ? eff?.voice : ''} disabled={off} onChange={(e) => void change({ voice: e.target.value })}>
          <option value="">Your default{eff && !own(eff.voiceFrom) ? ` (${eff.voice})` : ''}</option>
          {voices.map((v) => <option key={v.id} value={v.id}>{voiceLabel({ id: v.id, language: v.language })}</option>)}
        </select>
      </label>
      <label className="flex items-center gap-1">
        <span>Rate</span>
        <select className={select} value={String(rate)} disabled={off} onChange={(e) => void change({ speechSpeed: Number(e.target.value) })}>
          <option value="0">Your default{eff && !own(eff.speechSpeedFrom) ? ` (${rateLabel(eff.speechSpeed)})` : ''}</option>
          {[...new Set([...RATES, ...(rate ? [rate] : [])])].sort((a, b) => a - b).map((r) => <option key={r} value={String(r)}>{rateLabel(r)}</option>)}
        </select>
      </label>
      <label className="flex items-center gap-1">
        <span>Language</span>
        <select className={select} value={lang} disabled={off} onChange={(e) => void change({ language: e.target.value })}>
          <option value="">Your default{eff && !own(eff.languageFrom) ? ` (${eff.language ? languageName(eff.language) : 'detected'})` : ''}</option>
          {langs.map((l) => <option key={l} value={l}>{languageName(l)}</option>)}
        </select>
      </label>
      {error && <span role="alert" className="text-red-700 dark:text-red-400">{error}</span>}
    </div>
  )
}
