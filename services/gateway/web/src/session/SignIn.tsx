import { useState, type FormEvent } from 'react'
import { useApp } from '../store/app'
import { useAction } from '../ui/hooks'
import { signInError } from './slice'

// The key is sent once and exchanged for an HttpOnly session cookie; the
// page never stores it.
export function SignIn() {
  const signIn = useApp((s) => s.signIn)
  const notice = useApp((s) => s.sessionError)
  const [key, setKey] = useState('')
  const { run, busy, error } = useAction(signInError)

  async function submit(e: FormEvent) {
    e.preventDefault()
    if (!key.trim()) return
    if (await run(() => signIn(key))) setKey('')
  }

  return (
    <main className="flex min-h-full items-center justify-center p-4">
      <form onSubmit={submit} className="w-full max-w-sm space-y-4 rounded-2xl border border-slate-200 p-6 shadow-sm dark:border-slate-800" aria-labelledby="signin-title">
        <div className="flex items-center gap-3">
          <img src="/favicon.svg" alt="" width={40} height={40} />
          <h1 id="signin-title" className="text-2xl font-semibold">
            Sign in to Alicia
          </h1>
        </div>
        {notice && <p className="rounded bg-amber-100 p-2 text-sm text-amber-900 dark:bg-amber-900/40 dark:text-amber-100">{notice}</p>}
        <div className="space-y-1">
          <label htmlFor="api-key" className="block text-sm font-medium">
            API key
          </label>
          <input
            id="api-key"
            type="password"
            autoComplete="current-password"
            className="focus-ring w-full rounded-lg border border-slate-300 bg-white px-3 py-2 dark:border-slate-700 dark:bg-slate-900"
            value={key}
            onChange={(e) => setKey(e.target.value)}
            aria-describedby="api-key-help"
            aria-invalid={error ? true : undefined}
            required
          />
          <p id="api-key-help" className="text-xs text-slate-600 dark:text-slate-400">
            The key your administrator gave you (<code>alicia up</code> prints one). It is exchanged for a session and not kept in the browser.
          </p>
        </div>
        {error && (
          <p role="alert" className="text-sm text-red-700 dark:text-red-400">
            {error}
          </p>
        )}
        <button type="submit" disabled={busy} className="focus-ring w-full rounded-lg bg-indigo-600 px-3 py-2 font-medium text-white hover:bg-indigo-700 disabled:opacity-60">
          {busy ? 'Signing in…' : 'Sign in'}
        </button>
      </form>
    </main>
  )
}
