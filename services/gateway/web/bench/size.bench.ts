/// <reference lib="dom" />
// JavaScript on first load: the entry script of index.html (as the gateway
// serves it: the build it embeds) and every module it imports statically
// (its modulepreload links and the import graph of the entry chunk). Lazily
// loaded chunks (Markdown, Memories, Settings, voice) are not part of it. Sizes: gzip level 9 (zlib, as
// `gzip -9`) and what the gateway sends (its own gzip, internal/webui),
// and, as a check, what a browser fetched for the signed-in home screen.
import { get } from 'node:http'
import { gzipSync } from 'node:zlib'
import { test } from '@playwright/test'
import { bench, composerReady, kib, signedIn, writeResult } from './common'

// fetchRaw is path's body from the gateway as it arrives (not
// decompressed), asking for gzip or not.
function fetchRaw(path: string, gzip: boolean): Promise<{ body: Buffer; encoding: string }> {
  return new Promise((resolve, reject) => {
    get(bench.base + path, { headers: { 'Accept-Encoding': gzip ? 'gzip, deflate, br' : 'identity' } }, (res) => {
      const chunks: Buffer[] = []
      res.on('data', (c: Buffer) => chunks.push(c))
      res.on('end', () =>
        res.statusCode === 200
          ? resolve({ body: Buffer.concat(chunks), encoding: String(res.headers['content-encoding'] ?? 'identity') })
          : reject(new Error(`${path}: ${res.statusCode}`)),
      )
      res.on('error', reject)
    }).on('error', reject)
  })
}

// Static imports of a built chunk: `import{a as b}from"./x.js"` and
// `import"./x.js"`, not `import("./x.js")`.
const staticImport = /\bimport\s*(?:[\w$*{}\s,]+?\s*from\s*)?["']([^"']+\.js)["']/g

// firstLoad reads index.html as the gateway serves it (the build it
// embeds), then its entry script and modulepreload links and, from them,
// every static import.
async function firstLoad(): Promise<{ entry: string; preloads: string[]; files: Map<string, Buffer>; css: string[]; lazy: string[] }> {
  const html = (await fetchRaw('/', false)).body.toString('utf8')
  const entry = /<script[^>]*type="module"[^>]*src="([^"]+)"/.exec(html)?.[1]
  if (!entry) throw new Error('index.html has no module script')
  const preloads = [...html.matchAll(/<link[^>]*rel="modulepreload"[^>]*href="([^"]+)"/g)].map((m) => m[1]!)
  const css = [...html.matchAll(/<link[^>]*rel="stylesheet"[^>]*href="([^"]+)"/g)].map((m) => m[1]!)
  const files = new Map<string, Buffer>()
  const lazy = new Set<string>()
  const queue = [entry, ...preloads]
  while (queue.length > 0) {
    const path = queue.shift()!
    if (files.has(path)) continue
    const body = (await fetchRaw(path, false)).body
    files.set(path, body)
    const code = body.toString('utf8')
    for (const m of code.matchAll(staticImport)) queue.push(new URL(m[1]!, 'http://x' + path).pathname)
    // Chunks loaded on use: import("./x.js") and Vite's preload lists.
    for (const m of code.matchAll(/["'`](?:\.\/|\/?assets\/)([\w.-]+\.js)["'`]/g)) lazy.add('/assets/' + m[1]!)
  }
  return { entry, preloads, files, css, lazy: [...lazy].filter((f) => !files.has(f)) }
}

const gzip9 = (b: Buffer): number => gzipSync(b, { level: 9 }).length

test('JavaScript on first load', async ({ browser }) => {
  const { entry, preloads, files, css, lazy } = await firstLoad()
  const perFile = []
  let raw = 0, gz = 0, gw = 0
  for (const [f, data] of files) {
    const sent = await fetchRaw(f, true)
    perFile.push({ file: f, raw: data.length, gzip9: gzip9(data), gateway: sent.body.length, encoding: sent.encoding })
    raw += data.length
    gz += gzip9(data)
    gw += sent.body.length
  }
  // For context: the chunks loaded on use, and the stylesheet.
  let lazyGz = 0
  for (const f of lazy) lazyGz += gzip9((await fetchRaw(f, false)).body)
  let cssGz = 0
  for (const f of css) cssGz += gzip9((await fetchRaw(f, false)).body)

  // What a browser fetches for the signed-in home screen, empty cache.
  const ctx = await signedIn(browser)
  const page = await ctx.newPage()
  await page.goto('/')
  await composerReady(page)
  const fetched = await page.evaluate(() =>
    performance.getEntriesByType('resource')
      .filter((e) => new URL(e.name).pathname.endsWith('.js'))
      .map((e) => ({ file: new URL(e.name).pathname, transferred: (e as PerformanceResourceTiming).encodedBodySize })),
  )
  await ctx.close()
  const home = fetched.reduce((n, f) => n + f.transferred, 0)

  writeResult('size', {
    'js-first-load-gzip9-KiB': kib(gz),
    'js-first-load-gateway-KiB': kib(gw),
    'js-first-load-raw-KiB': kib(raw),
    'js-home-fetched-KiB': kib(home),
    'js-lazy-chunks-gzip9-KiB': kib(lazyGz),
    'css-first-load-gzip9-KiB': kib(cssGz),
  }, { entry, preloads, firstLoad: perFile, lazy, homeFetched: fetched })
})
