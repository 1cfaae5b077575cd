/// <reference lib="dom" />
// Cold load to interactive, and the conversation of 2,000 messages: opening
// it (to the first paint of its messages) and scrolling it from top to
// bottom (frame intervals). Times are the page's own (performance.now,
// navigation timing).
import { expect, test, type Page } from '@playwright/test'
import { bench, composerReady, messagesOf, quantile, round, signedIn, writeResult } from './common'

declare global {
  interface Window {
    __load?: { composer: number; messages: number; ready: number; frame: number; open: number }
    __open?: { start: number; dom: number; frame: number; paint: number }
  }
}

// watchLoad runs in the page before its scripts: it notes when the composer
// is enabled, when every message of the conversation is in the DOM, and the
// frame after both, and when the connection is open.
function watchLoad(expected: string[]): void {
  const t = { composer: 0, messages: 0, ready: 0, frame: 0, open: 0 }
  window.__load = t
  const check = (): void => {
    const now = performance.now()
    const ta = document.querySelector<HTMLTextAreaElement>('textarea#composer')
    if (!t.composer && ta && !ta.disabled && ta.labels?.[0]?.textContent === 'Message Alicia') t.composer = now
    if (!t.messages && expected.every((id) => document.querySelector(`article[data-message-id="${id}"]`))) t.messages = now
    if (!t.open && document.querySelector('[data-testid="connection"][data-status="open"]')) t.open = now
    if (t.composer && t.messages && !t.ready) {
      t.ready = now
      requestAnimationFrame(() => (t.frame = performance.now()))
    }
    if (t.ready && t.open) obs.disconnect()
  }
  const obs = new MutationObserver(check)
  obs.observe(document, { childList: true, subtree: true, attributes: true, attributeFilter: ['disabled', 'data-status'] })
}

test('cold load of a conversation to interactive', async ({ browser }) => {
  const ids = (await messagesOf(bench.small)).map((m) => m.id)
  const samples: Record<string, number>[] = []
  // Two loads warm the gateway (its gzip of each file is made once) and the browser process.
  for (let i = 0; i < bench.coldLoads + 2; i++) {
    const ctx = await signedIn(browser)
    await ctx.addInitScript(watchLoad, ids)
    const page = await ctx.newPage()
    await page.goto(`/c/${encodeURIComponent(bench.small)}`)
    await page.waitForFunction(() => (window.__load?.frame ?? 0) > 0 && (window.__load?.open ?? 0) > 0, undefined, { polling: 50 })
    const s = await page.evaluate(() => {
      const nav = performance.getEntriesByType('navigation')[0] as PerformanceNavigationTiming
      const conv = performance.getEntriesByType('resource').find((e) => /\/v1\/conversations\/[^/?]+$/.test(new URL(e.name).pathname)) as PerformanceResourceTiming | undefined
      const t = window.__load!
      return {
        ttfb: nav.responseStart, domContentLoaded: nav.domContentLoadedEventEnd, load: nav.loadEventEnd,
        composer: t.composer, messages: t.messages, interactive: t.ready, frame: t.frame, wsOpen: t.open,
        conversationFetch: conv ? conv.responseEnd - conv.startTime : NaN,
      }
    })
    await ctx.close()
    if (i >= 2) samples.push(Object.fromEntries(Object.entries(s).map(([k, v]) => [k, round(v, 1)])))
  }
  const col = (k: string): number[] => samples.map((s) => s[k]!)
  writeResult('coldload', {
    'cold-load-p50-ms': quantile(col('interactive'), 0.5),
    'cold-load-p90-ms': quantile(col('interactive'), 0.9),
    'cold-load-max-ms': Math.max(...col('interactive')),
    'cold-load-ttfb-p50-ms': quantile(col('ttfb'), 0.5),
    'cold-load-dcl-p50-ms': quantile(col('domContentLoaded'), 0.5),
    'cold-load-ws-open-p50-ms': quantile(col('wsOpen'), 0.5),
  }, { loads: samples.length, messages: ids.length, samples })
})

// The same cold load without the app: a page of the gateway's origin that
// does only what the page needs before it is interactive — the
// conversation's JSON and an open WebSocket, started together — timed from
// the navigation like the app's: what the network and the gateway cost,
// next to what the app adds.
test('cold load of a conversation to interactive, bare page', async ({ browser }) => {
  const samples: number[] = []
  for (let i = 0; i < bench.coldLoads + 2; i++) {
    const ctx = await signedIn(browser)
    const page = await ctx.newPage()
    await page.goto('/favicon.svg')
    const t = await page.evaluate(async (cid) => {
      const ws = new WebSocket(`ws://${location.host}/v1/ws`)
      const open = new Promise<void>((resolve, reject) => {
        ws.onopen = () => resolve()
        ws.onerror = () => reject(new Error('WebSocket failed'))
      })
      const res = await fetch(`/v1/conversations/${encodeURIComponent(cid)}`, { credentials: 'same-origin' })
      if (!res.ok) throw new Error(`GET conversation: ${res.status}`)
      await res.json()
      await open
      const done = performance.now()
      ws.close()
      return done
    }, bench.small)
    await ctx.close()
    if (i >= 2) samples.push(round(t, 1))
  }
  writeResult('coldload-bare', {
    'bare-cold-load-p50-ms': quantile(samples, 0.5),
    'bare-cold-load-p90-ms': quantile(samples, 0.9),
  }, { loads: samples.length, samples })
})

// openInApp opens cid from the home screen as a sidebar link does
// (history.pushState and the router), and returns the page's times: from
// the navigation to its first message in the DOM, and to the end of the
// frame that paints it.
async function openInApp(page: Page, cid: string): Promise<{ dom: number; frame: number; paint: number; fetch: number; jsonKiB: number }> {
  await page.evaluate((id) => {
    const t = { start: 0, dom: 0, frame: 0, paint: 0 }
    window.__open = t
    const obs = new MutationObserver(() => {
      if (t.dom || !document.querySelector('article[data-message-id]')) return
      t.dom = performance.now()
      obs.disconnect()
      requestAnimationFrame(() => {
        t.frame = performance.now()
        // Runs after the frame's style, layout and paint.
        const ch = new MessageChannel()
        ch.port1.onmessage = () => (t.paint = performance.now())
        ch.port2.postMessage(0)
      })
    })
    obs.observe(document.body, { childList: true, subtree: true })
    performance.clearResourceTimings()
    t.start = performance.now()
    history.pushState(null, '', `/c/${encodeURIComponent(id)}`)
    dispatchEvent(new PopStateEvent('popstate'))
  }, cid)
  await page.waitForFunction(() => (window.__open?.paint ?? 0) > 0, undefined, { polling: 50 })
  return page.evaluate(() => {
    const t = window.__open!
    const conv = performance.getEntriesByType('resource').find((e) => /\/v1\/conversations\/[^/?]+$/.test(new URL(e.name).pathname)) as PerformanceResourceTiming | undefined
    return {
      dom: t.dom - t.start, frame: t.frame - t.start, paint: t.paint - t.start,
      fetch: conv ? conv.responseEnd - conv.startTime : NaN, jsonKiB: conv ? conv.decodedBodySize / 1024 : NaN,
    }
  })
}

async function home(page: Page): Promise<void> {
  await page.evaluate(() => {
    history.pushState(null, '', '/')
    dispatchEvent(new PopStateEvent('popstate'))
  })
  await expect(page.locator('article[data-message-id]')).toHaveCount(0)
}

// scrollThrough scrolls the message list from its top to its bottom, step
// pixels a frame, and returns the intervals between frames.
function scrollThrough(step: number): Promise<{ intervals: number[]; height: number; longTasks: number[] }> {
  const el = document.querySelector<HTMLElement>('[role="log"]')
  if (!el) throw new Error('no message list')
  const frame = (): Promise<number> => new Promise((r) => requestAnimationFrame(r))
  return (async () => {
    el.scrollTop = 0
    for (let i = 0; i < 30; i++) await frame() // settle at the top
    const longTasks: number[] = []
    const po = new PerformanceObserver((l) => l.getEntries().forEach((e) => longTasks.push(e.duration)))
    try {
      po.observe({ type: 'longtask', buffered: false })
    } catch {
      /* no long task timing */
    }
    const intervals: number[] = []
    let last = await frame()
    let atBottom = 0
    while (atBottom < 5 && intervals.length < 20000) {
      const bottom = el.scrollHeight - el.clientHeight
      if (el.scrollTop >= bottom - 1) atBottom++
      else atBottom = 0
      el.scrollTop = Math.min(bottom, el.scrollTop + step)
      const now = await frame()
      intervals.push(now - last)
      last = now
    }
    po.disconnect()
    return { intervals, height: el.scrollHeight, longTasks }
  })()
}

test('conversation of 2,000 messages: open and scroll', async ({ browser }) => {
  const count = (await messagesOf(bench.large)).length
  expect(count).toBe(2000)

  // Opened from the home screen, as a click in the sidebar does.
  const ctx = await signedIn(browser)
  const page = await ctx.newPage()
  await page.goto('/')
  await composerReady(page)
  const opens = []
  for (let i = 0; i < bench.opens; i++) {
    if (i > 0) await home(page)
    opens.push(await openInApp(page, bench.large))
  }
  await expect(page.locator('article[data-message-id]').first()).toBeVisible()

  // Scrolled from the top to the bottom, 200 px a frame (12,000 px/s at 60 frames/s).
  const scroll = await page.evaluate(scrollThrough, 200)
  const frames = scroll.intervals
  const domNodes = await page.evaluate(() => document.getElementsByTagName('*').length)
  await ctx.close()

  // Opened by its URL in a fresh browser context: navigation start to the
  // first paint of its messages.
  const cold: number[] = []
  for (let i = 0; i < 3; i++) {
    const c = await signedIn(browser)
    await c.addInitScript(() => {
      const t = { paint: 0 }
      ;(window as unknown as { __cold: typeof t }).__cold = t
      const obs = new MutationObserver(() => {
        if (!document.querySelector('article[data-message-id]')) return
        obs.disconnect()
        requestAnimationFrame(() => {
          const ch = new MessageChannel()
          ch.port1.onmessage = () => (t.paint = performance.now())
          ch.port2.postMessage(0)
        })
      })
      obs.observe(document, { childList: true, subtree: true })
    })
    const p = await c.newPage()
    await p.goto(`/c/${encodeURIComponent(bench.large)}`)
    await p.waitForFunction(() => ((window as unknown as { __cold: { paint: number } }).__cold.paint ?? 0) > 0, undefined, { polling: 50 })
    cold.push(await p.evaluate(() => (window as unknown as { __cold: { paint: number } }).__cold.paint))
    await c.close()
  }

  const paints = opens.map((o) => o.paint)
  writeResult('large', {
    'open-2000-p50-ms': quantile(paints, 0.5),
    'open-2000-first-ms': paints[0]!,
    'open-2000-max-ms': Math.max(...paints),
    'open-2000-fetch-p50-ms': quantile(opens.map((o) => o.fetch), 0.5),
    'open-2000-json-KiB': opens[0]!.jsonKiB,
    'open-2000-cold-url-p50-ms': quantile(cold, 0.5),
    'scroll-p50-frame-ms': quantile(frames, 0.5),
    'scroll-p95-frame-ms': quantile(frames, 0.95),
    'scroll-max-frame-ms': Math.max(...frames),
    'scroll-frames': frames.length,
    'scroll-frames-over-50ms': frames.filter((f) => f > 50).length,
    'scroll-long-tasks': scroll.longTasks.length,
    'large-dom-elements': domNodes,
  }, {
    messages: count,
    opens: opens.map((o) => Object.fromEntries(Object.entries(o).map(([k, v]) => [k, round(v, 1)]))),
    coldUrl: cold.map((c) => round(c, 1)),
    scroll: { stepPx: 200, heightPx: scroll.height, frames: frames.length, overFrame: frames.filter((f) => f > 17.5).length, longTasksMs: scroll.longTasks.map((d) => round(d, 1)) },
  })
})
