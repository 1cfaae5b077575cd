// Settings and status: the backends, the voice check, the tools and the MCP
// servers (an administrator switches and adds them).
import { useState, type FormEvent } from 'react'
import { useApp } from '../store/app'
import type { ServerInfoJSON } from '../types'
import { useAction } from '../ui/hooks'
import { VoiceCheck } from '../voice/VoiceCheck'
import { VoiceLanguage } from './VoiceLanguage'
import { useServerStatus } from './hooks'

function Dot({ ok }: { ok: boolean }) {
  return <span className={`inline-block h-2 w-2 rounded-full ${ok ? 'bg-emerald-500' : 'bg-red-500'}`} aria-hidden="true" />
}

const ENGINES: { key: keyof ServerInfoJSON['models']; label: string }[] = [
  { key: 'llm', label: 'Language model' },
  { key: 'asr', label: 'Speech recognition' },
  { key: 'tts', label: 'Speech synthesis' },
  { key: 'embeddings', label: 'Embeddings (memory search)' },
]

export function Settings() {
  const admin = useApp((s) => s.session?.admin ?? false)
  const status = useServerStatus()
  const { info, tools, servers } = status
  // A switch that failed says so beside the status's own error.
  const change = useAction()
  const add = useAction()
  const error = change.error ?? status.error
  const [name, setName] = useState('')
  const [url, setUrl] = useState('')

  async function addServer(e: FormEvent) {
    e.preventDefault()
    if (await add.run(() => status.addServer(name.trim(), url.trim()))) {
      setName('')
      setUrl('')
    }
  }

  return (
    <section className="mx-auto w-full max-w-3xl space-y-6 overflow-y-auto p-4" aria-labelledby="settings-title">
      <div className="flex items-center justify-between">
        <h1 id="settings-title" className="text-xl font-semibold">Settings and status</h1>
        <button type="button" onClick={() => { change.clear(); void status.refresh() }} className="focus-ring rounded px-3 py-1 text-sm hover:bg-slate-100 dark:hover:bg-slate-800">Refresh</button>
      </div>
      {error && <p role="alert" className="text-sm text-red-700 dark:text-red-400">{error}</p>}
      <div>
        <h2 className="mb-2 font-medium">Server</h2>
        {info ? (
          <ul className="space-y-1 text-sm" aria-label="Backends">
            <li className="flex items-center gap-2" data-testid="server-connection">
              <Dot ok={info.connection.status === 'connected'} /> Connection: {info.connection.status}, {info.connection.latencyMs} ms to the bus
              {info.connection.error && <span className="text-red-700"> — {info.connection.error}</span>}
            </li>
            {ENGINES.map(({ key, label }) => {
              const e = info.models[key]
              return (
                <li key={key} className="flex flex-wrap items-center gap-2" data-testid={`engine-${key}`}>
                  <Dot ok={e.reachable} /> {label}: <span className="font-mono">{e.name}</span>
                  <span className={e.reachable ? 'text-emerald-700 dark:text-emerald-400' : 'text-red-700 dark:text-red-400'}>{e.reachable ? 'answers' : 'not answering'}</span>
                  {e.url && <span className="text-xs text-slate-500">{e.url}</span>}
                  {e.error && <span className="text-xs text-red-700 dark:text-red-400">{e.error}</span>}
                </li>
              )
            })}
            <li className="flex flex-wrap items-center gap-2" data-testid="voice-agents">
              <Dot ok={info.voiceAgents.length > 0} /> Voice agents:
              {info.voiceAgents.length === 0 ? (
                <span className="text-red-700 dark:text-red-400">none running (voice calls cannot start)</span>
              ) : (
                <span>
                  {info.voiceAgents.length} running, hearing speech with{' '}
                  {[...new Set(info.voiceAgents.map((a) => a.vad))].map((v) => (v === 'neural' ? 'the neural VAD (Silero)' : 'the energy VAD (fallback: noise can start turns)')).join(' and ')}
                </span>
              )}
              {info.voiceAgents.map((a) => a.detail && <span key={a.id} className="text-xs text-slate-500">{a.detail}</span>)}
            </li>
          </ul>
        ) : (
          <p className="text-sm text-slate-500">Loading…</p>
        )}
      </div>
      <VoiceCheck models={info?.models} />
      <VoiceLanguage info={info} />
      <div>
        <h2 className="mb-2 font-medium">Tools</h2>
        {!admin && <p className="mb-2 text-xs text-slate-600 dark:text-slate-400">Only an administrator can switch tools.</p>}
        <ul className="space-y-1" aria-label="Tools">
          {tools.map((t) => (
            <li key={t.name} className="flex items-start gap-2 text-sm">
              <input id={`tool-${t.name}`} type="checkbox" checked={t.enabled} disabled={!admin} className="focus-ring mt-1"
                onChange={(e) => void change.run(() => status.setTool(t.name, e.target.checked))} />
              <label htmlFor={`tool-${t.name}`}>
                <span className="font-mono font-medium">{t.name}</span> <span className="text-xs text-slate-500">({t.source})</span>
                <span className="block text-slate-600 dark:text-slate-400">{t.description}</span>
              </label>
            </li>
          ))}
          {tools.length === 0 && <li className="text-sm text-slate-500">No tools registered.</li>}
        </ul>
      </div>
      <div>
        <h2 className="mb-2 font-medium">MCP servers</h2>
        <ul className="space-y-1 text-sm" aria-label="MCP servers">
          {servers.map((s) => (
            <li key={s.name} className="flex flex-wrap items-center gap-2" data-testid={`mcp-${s.name}`}>
              <Dot ok={s.status === 'connected'} />
              <span className="font-mono">{s.name}</span> <span className="text-slate-500">{s.transport}</span>
              <span>{s.status}</span>
              {s.url && <span className="text-xs text-slate-500">{s.url}</span>}
              {s.lastError && <span className="text-xs text-red-700">{s.lastError}</span>}
              {admin && (
                <>
                  <button type="button" className="focus-ring rounded px-2 py-0.5 hover:bg-slate-100 dark:hover:bg-slate-800"
                    onClick={() => void change.run(() => status.setServer(s.name, !s.enabled))}>
                    {s.enabled ? 'Disable' : 'Enable'}
                  </button>
                  {s.transport === 'http' && (
                    <button type="button" className="focus-ring rounded px-2 py-0.5 text-red-700 hover:bg-red-50 dark:hover:bg-red-950" aria-label={`Remove ${s.name}`}
                      onClick={() => void change.run(() => status.removeServer(s.name))}>
                      Remove
                    </button>
                  )}
                </>
              )}
            </li>
          ))}
          {servers.length === 0 && <li className="text-slate-500">No MCP servers.</li>}
        </ul>
        {admin && (
          <form onSubmit={addServer} className="mt-2 flex flex-wrap items-end gap-2 text-sm">
            <div>
              <label htmlFor="mcp-name" className="block">Name</label>
              <input id="mcp-name" required pattern="[A-Za-z0-9_-]{1,64}" value={name} onChange={(e) => setName(e.target.value)}
                className="focus-ring rounded border border-slate-300 bg-white px-2 py-1 dark:border-slate-700 dark:bg-slate-900" />
            </div>
            <div className="min-w-48 flex-1">
              <label htmlFor="mcp-url" className="block">URL (http or https)</label>
              <input id="mcp-url" required type="url" value={url} onChange={(e) => setUrl(e.target.value)}
                className="focus-ring w-full rounded border border-slate-300 bg-white px-2 py-1 dark:border-slate-700 dark:bg-slate-900" />
            </div>
            <button type="submit" className="focus-ring rounded bg-indigo-600 px-3 py-1 text-white">Add server</button>
            {add.error && <p role="alert" className="w-full text-red-700 dark:text-red-400">{add.error}</p>}
          </form>
        )}
      </div>
    </section>
  )
}
