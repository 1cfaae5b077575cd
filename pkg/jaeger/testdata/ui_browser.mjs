// Drives the trace viewer in Debian's chromium with Playwright, for
// TestUIInBrowser (ui_test.go), which starts Jaeger, sends the traces and
// passes what to look for in the environment:
//
//   UI_URL            Jaeger's UI (http://127.0.0.1:port)
//   TRACE_ID          a trace of three nested spans (edge → llm.turn → llm.model_request)
//   OLDER_TRACE_ID    a trace of one span (memory.search, an error), a minute older
//   CONVERSATION_ID   the alicia.conversation_id of TRACE_ID's spans
//   MODEL_SPAN_ID     the span id of llm.model_request
//   SCREENSHOTS       where the pictures go
//   PLAYWRIGHT_DIR    the npm project whose node_modules has @playwright/test and @axe-core/playwright
//
// Every step waits for what it expects (no sleeps); a failure throws, and
// the process exits 1 with the reason.
import assert from 'node:assert/strict'
import { mkdirSync } from 'node:fs'
import { createRequire } from 'node:module'
import { join } from 'node:path'

const env = (k) => {
  const v = process.env[k]
  if (!v) throw new Error(`${k} is not set: run go test -run TestUIInBrowser ./jaeger/ in the pkg module`)
  return v
}
const ui = env('UI_URL')
const traceID = env('TRACE_ID')
const olderID = env('OLDER_TRACE_ID')
const conversation = env('CONVERSATION_ID')
const modelSpan = env('MODEL_SPAN_ID')
const screenshots = env('SCREENSHOTS')
const unknownID = '0123456789abcdef0123456789abcdef'
const require = createRequire(join(env('PLAYWRIGHT_DIR'), 'package.json'))
const { chromium } = require('@playwright/test')
const { AxeBuilder } = require('@axe-core/playwright')

const browser = await chromium.launch({
  executablePath: process.env.ALICIA_WEB_CHROMIUM || '/usr/bin/chromium',
  args: ['--no-sandbox', '--no-first-run', '--disable-background-networking', '--disable-component-update',
    '--disable-sync', '--disable-gpu', '--disable-quic'],
})
const problems = []
let page
try {
  const context = await browser.newContext({ viewport: { width: 1280, height: 800 }, locale: 'en-GB', timezoneId: 'UTC' })
  context.setDefaultTimeout(15_000)
  page = await context.newPage()
  watch(page)
  mkdirSync(screenshots, { recursive: true })

  // The list: both traces, newest first, with root span, duration, span count, conversation.
  await page.goto(ui + '/')
  await page.locator(`tr[data-trace="${olderID}"]`).waitFor()
  const rows = page.locator('table.traces tbody tr')
  assert.deepEqual(await rows.evaluateAll((trs) => trs.map((tr) => tr.dataset.trace)), [traceID, olderID], 'traces newest first')
  const cells = await rows.first().locator('td').allInnerTexts()
  assert.match(cells[0], /^edge\.receive UserMessage\s/, 'root span name')
  assert.match(cells[1], /^\d\d:\d\d:\d\d\.\d{3}$/, 'start time')
  assert.equal(cells[2], '420 ms', 'duration')
  assert.equal(cells[3], '3', 'span count')
  assert.equal(cells[4], conversation, 'conversation id')
  const older = await rows.nth(1).locator('td').allInnerTexts()
  assert.match(older[0], /^memory\.search\s/)
  assert.match(older[3], /^1\s+1 error$/, 'span count and errors')
  await axe(page, 'list')
  await shot(page, 'list')
  ok('the list shows both traces, newest first')

  // The traces of every service by default (each trace once, though the
  // turn's is in two); one service's when picked, in the URL.
  const picker = page.getByLabel('Service')
  assert.equal(await picker.inputValue(), '', 'all services by default')
  assert.deepEqual(await picker.locator('option').allInnerTexts(), ['All services', 'alicia-gateway', 'alicia-llm', 'alicia-memory'])
  await picker.selectOption('alicia-memory')
  await page.waitForURL((u) => u.hash === '#/?service=alicia-memory')
  await page.locator(`tr[data-trace="${traceID}"]`).waitFor({ state: 'detached' })
  assert.deepEqual(await rows.evaluateAll((trs) => trs.map((tr) => tr.dataset.trace)), [olderID], 'one service: its traces')
  await picker.selectOption('alicia-llm')
  await page.locator(`tr[data-trace="${traceID}"]`).waitFor()
  assert.deepEqual(await rows.evaluateAll((trs) => trs.map((tr) => tr.dataset.trace)), [traceID], 'another service: its traces')
  await picker.selectOption('')
  await page.waitForURL((u) => u.hash === '#/' || u.hash === '')
  await page.locator(`tr[data-trace="${olderID}"]`).waitFor()
  assert.equal(await rows.count(), 2, 'all services again')
  ok('the service picker: all services by default, one when picked')

  // Search by conversation id: only the trace of that conversation.
  await page.getByLabel('Trace or conversation id').fill(conversation)
  await page.getByLabel('Trace or conversation id').press('Enter')
  await page.getByRole('heading', { level: 1, name: `Traces of conversation ${conversation}` }).waitFor()
  await page.locator(`tr[data-trace="${traceID}"]`).waitFor()
  assert.equal(await rows.count(), 1, 'one trace of the conversation')
  ok('the search by conversation id lists its trace alone')

  // Open the trace from the list.
  await page.getByRole('link', { name: 'edge.receive UserMessage' }).click()
  const tree = page.getByRole('tree')
  await tree.waitFor()
  assert.equal(new URL(page.url()).hash, `#/trace/${traceID}`)
  const items = page.getByRole('treeitem')
  assert.equal(await items.count(), 3, 'three span rows')
  const rowsSeen = await items.evaluateAll((lis) => lis.map((li) => {
    const row = li.querySelector(':scope > .row')
    return {
      name: li.dataset.name, level: li.getAttribute('aria-level'),
      parent: li.parentElement.closest('[role="treeitem"]')?.dataset.name ?? null,
      scope: row.querySelector('.scope').textContent, duration: row.querySelector('.dur').textContent,
      bar: row.querySelector('.span-bar').getBoundingClientRect().width,
    }
  }))
  const expected = [
    { name: 'edge.receive UserMessage', level: '1', parent: null, scope: 'pkg/edge', duration: '420 ms' },
    { name: 'llm.turn', level: '2', parent: 'edge.receive UserMessage', scope: 'services/llm', duration: '388 ms' },
    { name: 'llm.model_request', level: '3', parent: 'llm.turn', scope: 'services/llm', duration: '360 ms' },
  ]
  assert.deepEqual(rowsSeen.map(({ bar, ...r }) => r), expected, 'span rows and their nesting')
  assert.ok(rowsSeen[0].bar > rowsSeen[1].bar && rowsSeen[1].bar > rowsSeen[2].bar && rowsSeen[2].bar > 100, `bar widths ${rowsSeen.map((r) => r.bar)}`)
  ok('the trace shows three span rows, nested by parent, with scope and duration')

  // A click shows the span's attributes; the URL names the span.
  await page.getByRole('treeitem', { name: /^llm\.model_request/ }).locator('.row').first().click()
  const details = page.locator('#details')
  await details.getByRole('heading', { level: 2, name: 'llm.model_request' }).waitFor()
  const attrs = await details.locator('table.kv').first().locator('tr').allInnerTexts()
  assert.ok(attrs.some((r) => /gen_ai\.request\.model\s+fake-chat/.test(r)), `attributes ${attrs}`)
  assert.ok(attrs.some((r) => /gen_ai\.usage\.output_tokens\s+42/.test(r)), `attributes ${attrs}`)
  assert.match(await details.locator('dl.facts').innerText(), /github\.com\/alicia-voice\/alicia\/services\/llm/)
  assert.equal(new URL(page.url()).hash, `#/trace/${traceID}?span=${modelSpan}`)
  ok('a click on a span shows its attributes')

  // Its parent's events; the keyboard moves through the tree.
  await page.getByRole('treeitem', { name: /^llm\.model_request/ }).press('ArrowUp')
  await details.getByRole('heading', { level: 2, name: 'llm.turn' }).waitFor()
  const events = await details.locator('ol.events > li').allInnerTexts()
  assert.equal(events.length, 1)
  assert.match(events[0], /^\+180 ms\s+llm\.first_token[\s\S]*tokens\s+1/)
  await page.keyboard.press('ArrowLeft') // collapses llm.turn
  await page.getByRole('treeitem', { name: /^llm\.model_request/ }).waitFor({ state: 'hidden' })
  await page.keyboard.press('ArrowRight')
  await page.getByRole('treeitem', { name: /^llm\.model_request/ }).waitFor()
  await page.keyboard.press('Home')
  await details.getByRole('heading', { level: 2, name: 'edge.receive UserMessage' }).waitFor()
  await page.keyboard.press('End')
  await details.getByRole('heading', { level: 2, name: 'llm.model_request' }).waitFor()
  ok('arrow keys, Home and End move the selection; Left and Right collapse and expand')
  await page.keyboard.press('ArrowUp')
  await details.getByRole('heading', { level: 2, name: 'llm.turn' }).waitFor()
  await axe(page, 'trace')
  await shot(page, 'trace')

  // The deep link survives a reload, with the span it names.
  await page.reload()
  await details.getByRole('heading', { level: 2, name: 'llm.turn' }).waitFor()
  assert.equal(await page.getByRole('treeitem', { name: /^llm\.turn/ }).getAttribute('aria-selected'), 'true')
  ok('#/trace/<id>?span=<id> opens the same view on reload')

  // A fresh page on a deep link; the search box with a trace id (upper case).
  const fresh = await context.newPage()
  watch(fresh)
  await fresh.goto(`${ui}/#/trace/${olderID}`)
  await fresh.getByRole('heading', { level: 1, name: 'memory.search' }).waitFor()
  assert.equal(await fresh.getByRole('treeitem').count(), 1)
  assert.match(await fresh.getByRole('treeitem').innerText(), /error/)
  await fresh.getByRole('treeitem').locator('.row').click()
  await fresh.locator('#details').getByText('ERROR: embedding server unreachable').waitFor()
  await shot(fresh, 'trace-error')
  await fresh.getByLabel('Trace or conversation id').fill(traceID.toUpperCase())
  await fresh.getByLabel('Trace or conversation id').press('Enter')
  await fresh.getByRole('heading', { level: 1, name: 'edge.receive UserMessage' }).waitFor()
  assert.equal(await fresh.getByRole('treeitem').count(), 3)
  ok('a deep link opens its trace; the search box opens a trace by id')

  // A trace Jaeger does not have.
  await fresh.goto(`${ui}/#/trace/${unknownID}`)
  await fresh.getByRole('alert').filter({ hasText: 'Jaeger has no trace with this id' }).waitFor()
  ok('an unknown trace id says so')
  await fresh.close()

  // The same trace on a phone, and in the dark.
  const deepLink = page.url()
  await page.setViewportSize({ width: 390, height: 844 })
  await axe(page, 'trace (390 px)')
  await shot(page, 'trace')
  await page.goto(ui + '/')
  await page.locator(`tr[data-trace="${olderID}"]`).waitFor()
  await axe(page, 'list (390 px)')
  await shot(page, 'list')
  await page.setViewportSize({ width: 1280, height: 800 })
  await page.emulateMedia({ colorScheme: 'dark' })
  await axe(page, 'list (dark)')
  await shot(page, 'list-dark')
  await page.goto(deepLink)
  await details.getByRole('heading', { level: 2, name: 'llm.turn' }).waitFor()
  await axe(page, 'trace (dark)')
  await shot(page, 'trace-dark')

  assert.deepEqual(problems, [], 'console errors or failed requests')
  ok('no console errors, no failed requests')
} catch (err) {
  if (page) await page.screenshot({ path: join(screenshots, 'failure.png') }).catch(() => {})
  console.error(err.stack || String(err))
  if (problems.length) console.error('console errors and failed requests:\n  ' + problems.join('\n  '))
  process.exitCode = 1
} finally {
  await browser.close()
}

function ok(what) {
  console.log(`ok: ${what}`)
}

// watch records the page's console errors, uncaught exceptions and
// requests that failed or left 127.0.0.1.
function watch(p) {
  p.on('console', (m) => {
    // The unknown trace's 404 is expected; any other error is not.
    if (m.type() === 'error' && !m.location().url.endsWith(`/api/traces/${unknownID}`)) problems.push(`console: ${m.text()} (${m.location().url})`)
  })
  p.on('pageerror', (e) => problems.push(`page error: ${e.message}`))
  p.on('requestfailed', (r) => { if (r.failure()?.errorText !== 'net::ERR_ABORTED') problems.push(`request failed: ${r.url()} ${r.failure()?.errorText}`) })
  p.on('request', (r) => { if (!/^(http:\/\/127\.0\.0\.1:|data:)/.test(r.url())) problems.push(`request off the machine: ${r.url()}`) })
}

// axe fails on serious or critical accessibility violations.
async function axe(p, screen) {
  const results = await new AxeBuilder({ page: p }).analyze()
  const bad = results.violations.filter((v) => v.impact === 'serious' || v.impact === 'critical')
  assert.deepEqual(bad.map((v) => `${v.impact} ${v.id}: ${v.help}: ${v.nodes.map((n) => n.target.join(' ')).join(', ')}`), [], `axe on ${screen}`)
}

async function shot(p, screen) {
  const width = p.viewportSize()?.width ?? 0
  await p.screenshot({ path: join(screenshots, `${screen}-${width}.png`), animations: 'disabled', caret: 'hide' })
}
