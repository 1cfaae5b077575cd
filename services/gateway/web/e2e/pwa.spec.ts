/// <reference lib="dom" />
// The installable web app: the manifest and its icons, the service worker
// (registered, in control after a reload, never in the way of /v1), and the
// app shell offline: a reload still shows the page, which says it is
// offline, and it recovers once back online. Each test has its own browser
// context, so its own service worker registration and caches.
import { expect, test, type Page } from '@playwright/test'
import { axe, PHONE, shot, signIn, stack } from './fixtures'

interface Manifest {
  name: string
  short_name: string
  start_url: string
  scope: string
  display: string
  theme_color: string
  background_color: string
  icons: { src: string; sizes: string; type: string; purpose?: string }[]
}

// pngSize reads a PNG's width and height from its IHDR chunk.
function pngSize(b: Buffer): string {
  expect(b.subarray(0, 8).equals(Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a])), 'a PNG').toBe(true)
  return `${b.readUInt32BE(16)}x${b.readUInt32BE(20)}`
}

// controlled waits until the service worker is active and controls the page;
// it returns the worker's script URL.
async function controlled(page: Page): Promise<string> {
  return page.evaluate(async () => {
    const reg = await navigator.serviceWorker.ready
    if (!navigator.serviceWorker.controller)
      await new Promise((resolve) => navigator.serviceWorker.addEventListener('controllerchange', resolve, { once: true }))
    return reg.active?.scriptURL ?? ''
  })
}

test('the manifest parses, with its icons reachable', async ({ page, context }) => {
  await page.goto('/')
  const href = await page.locator('link[rel="manifest"]').getAttribute('href')
  expect(href).toBe('/manifest.webmanifest')
  const res = await page.request.get(href!)
  expect(res.status()).toBe(200)
  expect(res.headers()['content-type']).toBe('application/manifest+json')
  expect(res.headers()['cache-control']).toBe('no-cache')
  const m = (await res.json()) as Manifest
  expect(m).toMatchObject({ name: 'Alicia', short_name: 'Alicia', start_url: '/', scope: '/', display: 'standalone' })
  expect(m.theme_color).toMatch(/^#[0-9a-f]{6}$/)
  expect(m.background_color).toMatch(/^#[0-9a-f]{6}$/)

  // Chromium's own reading of it: no error, every icon kept.
  const cdp = await context.newCDPSession(page)
  const app = (await cdp.send('Page.getAppManifest', {})) as { url: string; errors: { message: string }[]; data: string }
  expect(app.url).toBe(`${stack.base}/manifest.webmanifest`)
  expect(app.errors).toEqual([])
  expect(JSON.parse(app.data)).toEqual(m)

  const want = new Map([
    ['/favicon.svg', { type: 'image/svg+xml', size: 'any', purpose: 'any' }],
    ['/icon-192.png', { type: 'image/png', size: '192x192', purpose: 'any' }],
    ['/icon-512.png', { type: 'image/png', size: '512x512', purpose: 'any' }],
    ['/icon-maskable-512.png', { type: 'image/png', size: '512x512', purpose: 'maskable' }],
  ])
  expect(m.icons.map((i) => i.src).sort()).toEqual([...want.keys()].sort())
  for (const icon of m.icons) {
    const w = want.get(icon.src)!
    expect(icon, icon.src).toMatchObject({ type: w.type, sizes: w.size, purpose: w.purpose })
    const r = await page.request.get(icon.src)
    expect(r.status(), icon.src).toBe(200)
    expect(r.headers()['content-type'], icon.src).toBe(w.type)
    if (w.type === 'image/png') expect(pngSize(await r.body()), icon.src).toBe(w.size)
  }

  // The icon iOS uses, and the colour of the browser's bar.
  const apple = await page.locator('link[rel="apple-touch-icon"]').getAttribute('href')
  const r = await page.request.get(apple!)
  expect(r.headers()['content-type']).toBe('image/png')
  expect(pngSize(await r.body())).toBe('180x180')
  await expect(page.locator('meta[name="theme-color"]')).toHaveCount(2)
})

test('the service worker registers, controls the page after a reload, and leaves /v1 alone', async ({ page, context }) => {
  await signIn(page, stack.aliceKey)
  await expect(page.getByRole('heading', { name: 'How can I help?' })).toBeVisible()
  expect(await controlled(page)).toBe(`${stack.base}/sw.js`)

  const sw = await page.request.get('/sw.js')
  expect(sw.headers()['content-type']).toBe('text/javascript; charset=utf-8')
  expect(sw.headers()['cache-control']).toBe('no-cache')

  // After a reload the page is the worker's from the start: the page and
  // its assets come through it, the API does not.
  const seen: { url: string; fromSW: boolean }[] = []
  page.on('response', (r) => seen.push({ url: new URL(r.url()).pathname, fromSW: r.fromServiceWorker() }))
  await page.reload()
  await expect(page.getByRole('heading', { name: 'How can I help?' })).toBeVisible()
  expect(await page.evaluate(() => navigator.serviceWorker.controller?.scriptURL)).toBe(`${stack.base}/sw.js`)
  expect(seen.find((s) => s.url === '/')?.fromSW, 'the page').toBe(true)
  const assets = seen.filter((s) => s.url.startsWith('/assets/'))
  expect(assets.length).toBeGreaterThan(0)
  for (const a of assets) expect(a.fromSW, a.url).toBe(true)
  const apiCalls = seen.filter((s) => s.url.startsWith('/v1/'))
  expect(apiCalls.length).toBeGreaterThan(0)
  for (const a of apiCalls) expect(a.fromSW, a.url).toBe(false)

  // Chromium's static routes (the worker's install adds them) send the API
  // to the network without a fetch event; the assets go through the worker.
  const timing = await page.evaluate(() =>
    performance.getEntriesByType('resource').map((e) => ({
      url: new URL(e.name).pathname,
      source: (e as PerformanceResourceTiming & { workerMatchedSourceType?: string }).workerMatchedSourceType,
    })),
  )
  const apiTiming = timing.filter((e) => e.url.startsWith('/v1/'))
  expect(apiTiming.length).toBeGreaterThan(0)
  for (const e of apiTiming) expect(e.source, e.url).toBe('network')
  for (const e of timing.filter((e) => e.url.startsWith('/assets/'))) expect(e.source, e.url).toBe('')

  // One cache, holding the shell and the page's assets, and nothing of /v1.
  const cached = await page.evaluate(async () => {
    const names = await caches.keys()
    const urls: string[] = []
    for (const n of names) for (const req of await (await caches.open(n)).keys()) urls.push(new URL(req.url).pathname)
    const scripts = [...document.querySelectorAll<HTMLScriptElement>('script[src]')].map((s) => new URL(s.src).pathname)
    return { names, urls, scripts }
  })
  expect(cached.names).toHaveLength(1)
  expect(cached.names[0]).toMatch(/^alicia-[0-9a-f]{16}$/)
  expect(cached.urls).toEqual(expect.arrayContaining(['/index.html', '/manifest.webmanifest', '/icon-192.png', ...cached.scripts]))
  expect(cached.urls.filter((u) => u.startsWith('/v1') || ['/healthz', '/readyz', '/metrics', '/sw.js'].includes(u))).toEqual([])

  // Chromium finds the app installable (manifest, icons, a worker in
  // control): no error but the one of Playwright's contexts, which are
  // incognito.
  const cdp = await context.newCDPSession(page)
  const { installabilityErrors } = (await cdp.send('Page.getInstallabilityErrors')) as { installabilityErrors: { errorId: string }[] }
  expect(installabilityErrors.map((e) => e.errorId).filter((id) => id !== 'in-incognito')).toEqual([])
})

test.describe('offline', () => {
  test.use({ viewport: PHONE })

  test('the shell loads from the service worker, says it is offline, and recovers', async ({ page, context }) => {
    await signIn(page, stack.aliceKey)
    const home = page.getByRole('heading', { name: 'How can I help?' })
    await expect(home).toBeVisible()
    await controlled(page)
    const offline = page.getByTestId('offline')
    await expect(offline).toHaveText('')

    await context.setOffline(true)
    // The API cannot be reached, from the page nor from the worker.
    expect(await page.evaluate(() => fetch('/v1/session').then((r) => r.status, () => 'failed'))).toBe('failed')
    const [worker] = context.serviceWorkers()
    expect(worker, 'the service worker').toBeTruthy()
    expect(await worker!.evaluate(() => fetch('/healthz', { cache: 'no-store' }).then((r) => r.status, () => 'failed'))).toBe('failed')

    // The signed-in home screen says so.
    await expect(offline).toHaveText('Offline')
    await expect(home).toBeVisible()
    await axe(page, 'home offline')
    await shot(page, 'home-offline')

    // A reload is the cached shell: the page runs, cannot check the session
    // and says it is offline (not a sign-in: the session may well be fine).
    const res = await page.reload()
    expect(res?.fromServiceWorker()).toBe(true)
    await expect(offline).toHaveText('Offline')
    await expect(page.getByRole('heading', { name: 'You are offline' })).toBeVisible()
    await expect(page.getByRole('heading', { name: 'Sign in to Alicia' })).toHaveCount(0)
    await axe(page, 'offline')
    await shot(page, 'offline')

    // Back online: the session is checked again, the home screen is back.
    await context.setOffline(false)
    await expect(home).toBeVisible()
    await expect(offline).toHaveText('')
    expect(await page.evaluate(() => fetch('/v1/session').then((r) => r.status, () => 'failed'))).toBe(200)
  })
})
