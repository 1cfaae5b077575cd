/// <reference lib="dom" />
// What the benchmark specs share: the stack and the work BenchmarkWebClient
// describes in ALICIA_WEB_BENCH_* (and ALICIA_WEB_BASE_URL,
// ALICIA_WEB_ALICE_KEY), statistics, and the result file each spec writes.
import { mkdirSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { expect, request, type APIRequestContext, type Browser, type BrowserContext, type Page } from '@playwright/test'

function env(name: string): string {
  const v = process.env[name]
  if (!v) throw new Error(`${name} is not set: run the benchmarks through go test -bench WebClient ./services/e2e/web/`)
  return v
}
const num = (name: string): number => Number(env(name))

// Read when a spec uses them, so a spec that needs only some (the voice
// benchmark) runs without the others.
export const bench = {
  get base() { return env('ALICIA_WEB_BASE_URL') },
  get key() { return env('ALICIA_WEB_ALICE_KEY') },
  get out() { return env('ALICIA_WEB_BENCH_OUT') },
  // A conversation of a few turns (the cold loads open it) and one of 2,000 messages.
  get small() { return env('ALICIA_WEB_BENCH_SMALL') },
  get large() { return env('ALICIA_WEB_BENCH_LARGE') },
  get warmup() { return num('ALICIA_WEB_BENCH_WARMUP') },
  get turns() { return num('ALICIA_WEB_BENCH_TURNS') },
  // Turns start at least this far apart, in the page as in the Go client:
  // the gateway paces a session beyond 20 envelopes a second.
  get paceMs() { return num('ALICIA_WEB_BENCH_PACE_MS') },
  get memoryTurns() { return num('ALICIA_WEB_BENCH_MEMORY_TURNS') },
  get coldLoads() { return num('ALICIA_WEB_BENCH_COLD_LOADS') },
  get opens() { return num('ALICIA_WEB_BENCH_OPENS') },
}

// quantile is the q-quantile of xs (nearest rank), as the Go side computes it.
export function quantile(xs: number[], q: number): number {
  if (xs.length === 0) return NaN
  const s = [...xs].sort((a, b) => a - b)
  return s[Math.min(s.length - 1, Math.max(0, Math.ceil(q * s.length) - 1))]!
}

export const round = (x: number, digits = 2): number => Math.round(x * 10 ** digits) / 10 ** digits
export const kib = (bytes: number): number => round(bytes / 1024)

// writeResult writes <out>/<name>.json: figures named with their unit, and
// the samples behind them.
export function writeResult(name: string, metrics: Record<string, number>, detail: unknown): void {
  mkdirSync(bench.out, { recursive: true })
  const rounded = Object.fromEntries(Object.entries(metrics).map(([k, v]) => [k, round(v)]))
  writeFileSync(join(bench.out, `${name}.json`), JSON.stringify({ metrics: rounded, detail }, null, 1))
  console.log(`${name}: ${JSON.stringify(rounded)}`)
}

// api is a REST client with the key as its bearer token.
export async function api(): Promise<APIRequestContext> {
  return request.newContext({ baseURL: bench.base, extraHTTPHeaders: { Authorization: `Bearer ${bench.key}` } })
}

export interface StoredMessage {
  id: string
  role: string
  status: string
}

export async function messagesOf(cid: string): Promise<StoredMessage[]> {
  const ctx = await api()
  try {
    const res = await ctx.get(`/v1/conversations/${encodeURIComponent(cid)}`)
    expect(res.ok(), await res.text()).toBe(true)
    return ((await res.json()) as { messages: StoredMessage[] }).messages
  } finally {
    await ctx.dispose()
  }
}

export async function newConversation(title: string): Promise<string> {
  const ctx = await api()
  try {
    const res = await ctx.post('/v1/conversations', { data: { title } })
    expect(res.status(), await res.text()).toBe(201)
    return ((await res.json()) as { id: string }).id
  } finally {
    await ctx.dispose()
  }
}

type StorageState = Awaited<ReturnType<BrowserContext['storageState']>>
let session: StorageState | undefined

// signedIn is a fresh browser context (empty cache) holding a session
// cookie, as a returning user's browser would after its cache was cleared.
export async function signedIn(browser: Browser): Promise<BrowserContext> {
  if (!session) {
    const ctx = await request.newContext({ baseURL: bench.base })
    const res = await ctx.post('/v1/session', { data: { apiKey: bench.key } })
    expect(res.ok(), `POST /v1/session: ${res.status()} ${await res.text()}`).toBe(true)
    session = await ctx.storageState()
    await ctx.dispose()
  }
  return browser.newContext({ storageState: session, baseURL: bench.base, viewport: { width: 1280, height: 800 } })
}

export async function composerReady(page: Page): Promise<void> {
  await expect(page.getByLabel('Message Alicia')).toBeEnabled()
}
