/// <reference lib="dom" />
// What the browser specs share: the stack TestBrowser started (ALICIA_WEB_*),
// the phrases its fake model answers (services/e2e/web/model_test.go:
// keep both in step), and small helpers.
import { mkdirSync } from 'node:fs'
import { join } from 'node:path'
import AxeBuilder from '@axe-core/playwright'
import { expect, request, type APIRequestContext, type Locator, type Page } from '@playwright/test'

function env(name: string): string {
  const v = process.env[name]
  if (!v) throw new Error(`${name} is not set: run the browser tests through go test -run TestBrowser ./services/e2e/web/`)
  return v
}

export const stack = {
  base: env('ALICIA_WEB_BASE_URL'),
  control: env('ALICIA_WEB_CONTROL_URL'),
  aliceKey: env('ALICIA_WEB_ALICE_KEY'),
  bobKey: env('ALICIA_WEB_BOB_KEY'),
  // carol improves Alicia (optimize.spec.ts) and does nothing else.
  carolKey: env('ALICIA_WEB_CAROL_KEY'),
  mcpURL: env('ALICIA_WEB_MCP_URL'),
  screenshots: env('ALICIA_WEB_SCREENSHOTS'),
}

// Phrases the fake model answers (model_test.go).
export const say = {
  markdown: 'Show me some Markdown',
  html: 'Show me some HTML',
  shortStory: 'Tell me a short story slowly',
  longStory: 'Tell me a long story slowly',
  tool: 'What is six times seven?',
  think: 'Think it over: should I?',
  fail: 'Fail once, then work',
  everything: 'Zorblat everything',
  // Answered at length unless the system prompt asks for one sentence.
  garden: 'About my garden',
}

// What the fake models of model_test.go say about the garden questions.
export const brief = { instruction: 'Answer in one sentence.', answer: 'It is done.', tooLong: 'The answer is too long: it rambles beyond the question.' }

// story is the text of the slow answer of n sentences.
export function story(n: number): string {
  return Array.from({ length: n }, (_, i) => `Sentence ${i + 1} of the story.`).join(' ')
}

export const PHONE = { width: 390, height: 844 }
export const DESKTOP = { width: 1280, height: 800 }

// signIn opens a session for key (the cookie lands in the page's context)
// and opens path.
export async function signIn(page: Page, key: string, path = '/'): Promise<void> {
  const res = await page.request.post('/v1/session', { data: { apiKey: key } })
  expect(res.ok(), `POST /v1/session: ${res.status()} ${await res.text()}`).toBe(true)
  await page.goto(path)
}

// api is a REST client with key as its bearer token, as a script would use.
export async function api(key: string): Promise<APIRequestContext> {
  return request.newContext({ baseURL: stack.base, extraHTTPHeaders: { Authorization: `Bearer ${key}` } })
}

export async function json<T>(res: { ok(): boolean; status(): number; text(): Promise<string>; json(): Promise<unknown> }): Promise<T> {
  if (!res.ok()) throw new Error(`${res.status()}: ${await res.text()}`)
  return (await res.json()) as T
}

export const composer = (page: Page): Locator => page.getByLabel('Message Alicia')

// send types text in the composer and sends it with Enter.
export async function send(page: Page, text: string): Promise<void> {
  await composer(page).fill(text)
  await composer(page).press('Enter')
}

export const answers = (page: Page): Locator => page.locator('article[data-role="assistant"]')
export const userMessages = (page: Page): Locator => page.locator('article[data-role="user"]')
export const lastAnswer = (page: Page): Locator => answers(page).last()
// body is the text of a message (an answer's rendered Markdown).
export const body = (message: Locator): Locator => message.locator('.prose-alicia')

// completed waits until the answer is complete and returns it.
export async function completed(answer: Locator, timeout = 20_000): Promise<Locator> {
  await expect(answer).toHaveAttribute('data-status', 'completed', { timeout })
  return answer
}

// ask sends text in the open conversation and waits for its whole answer
// (a new answer, not the one before it).
export async function ask(page: Page, text: string): Promise<Locator> {
  const before = await answers(page).count()
  await send(page, text)
  await expect(answers(page)).toHaveCount(before + 1)
  return completed(lastAnswer(page))
}

// newChat opens a new conversation by sending text from the home screen
// and returns its id once the page is at its URL.
export async function newChat(page: Page, text: string): Promise<string> {
  await page.goto('/')
  await send(page, text)
  await page.waitForURL(/\/c\/[^/?]+/)
  return conversationId(page)
}

export function conversationId(page: Page): string {
  const m = /\/c\/([^/?]+)/.exec(new URL(page.url()).pathname)
  if (!m?.[1]) throw new Error(`not a conversation URL: ${page.url()}`)
  return decodeURIComponent(m[1])
}

// timeout: how long to wait (back online, the page's first attempt may fail
// while the browser still reports no network; its next comes after a
// back-off, and on a loaded machine the gateway's first frame, the
// server's report with its probes, takes seconds).
export async function connected(page: Page, timeout = 10_000): Promise<void> {
  await expect(page.getByTestId('connection')).toHaveAttribute('data-status', 'open', { timeout })
}

// axe checks the page with axe-core and fails on serious or critical
// violations, listing them.
export async function axe(page: Page, screen: string): Promise<void> {
  const results = await new AxeBuilder({ page }).analyze()
  const bad = results.violations.filter((v) => v.impact === 'serious' || v.impact === 'critical')
  const described = bad.map((v) => `${v.impact} ${v.id}: ${v.help}\n    ${v.nodes.map((n) => n.target.join(' ')).join('\n    ')}`)
  expect(described, `axe on ${screen} at ${page.viewportSize()?.width}px`).toEqual([])
}

// shot saves a screenshot of the page as <screen>-<width>.png in the
// screenshots folder (web/screenshots).
export async function shot(page: Page, screen: string): Promise<void> {
  mkdirSync(stack.screenshots, { recursive: true })
  const width = page.viewportSize()?.width ?? 0
  // Animations stopped and the caret hidden, so the pictures do not change run to run.
  await page.screenshot({ path: join(stack.screenshots, `${screen}-${width}.png`), animations: 'disabled', caret: 'hide' })
}

// control asks the test's control server to do something to the stack.
export async function control(path: string): Promise<void> {
  const ctx = await request.newContext()
  try {
    const res = await ctx.post(stack.control + path, { timeout: 60_000 })
    expect(res.status(), await res.text()).toBe(204)
  } finally {
    await ctx.dispose()
  }
}

// Globals the specs read in the page.
declare global {
  interface Window {
    __xss?: unknown
  }
}
