// Renders the PNG icons of the web app manifest from public/favicon.svg with
// Debian's chromium (/usr/bin/chromium, headless, through playwright-core
// from node_modules: nothing is downloaded) and writes them to public/:
//
//   icon-192.png, icon-512.png   the favicon as it is (rounded square,
//                                transparent corners): purpose "any"
//   icon-maskable-512.png        full-bleed square, the letter scaled into
//                                the central safe zone (a circle of 80%):
//                                purpose "maskable" (Android crops it)
//   apple-touch-icon.png         180×180, full-bleed (iOS rounds the corners
//                                itself and shows transparency as black)
//
// Run after changing favicon.svg: `node scripts/icons.mjs`, then commit the
// PNGs. The same chromium gives the same bytes.
import { readFileSync, writeFileSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { chromium } from 'playwright-core'

const here = dirname(fileURLToPath(import.meta.url))
const pub = join(here, '..', 'public')
const favicon = readFileSync(join(pub, 'favicon.svg'), 'utf8')

// fullBleed is the favicon without its rounded corners, its drawing (the
// path) scaled by scale around the centre of the 64×64 view box.
function fullBleed(scale) {
  const rect = /<rect width="64" height="64" rx="\d+"/
  const path = /<path [^>]*\/>/
  if (!rect.test(favicon) || !path.test(favicon)) throw new Error('favicon.svg changed shape: update scripts/icons.mjs')
  return favicon
    .replace(rect, '<rect width="64" height="64"')
    .replace(path, (p) => `<g transform="translate(32 32) scale(${scale}) translate(-32 -32)">${p}</g>`)
}

const icons = [
  { file: 'icon-192.png', size: 192, svg: favicon },
  { file: 'icon-512.png', size: 512, svg: favicon },
  { file: 'icon-maskable-512.png', size: 512, svg: fullBleed(0.8) },
  { file: 'apple-touch-icon.png', size: 180, svg: fullBleed(0.9) },
]

const browser = await chromium.launch({
  executablePath: '/usr/bin/chromium',
  args: ['--no-sandbox', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-gpu', '--font-render-hinting=none'],
})
try {
  for (const { file, size, svg } of icons) {
    const page = await browser.newPage({ viewport: { width: size, height: size }, deviceScaleFactor: 1 })
    const sized = svg.replace('<svg ', `<svg width="${size}" height="${size}" `)
    await page.setContent(`<!doctype html><style>html,body{margin:0;background:transparent}svg{display:block}</style>${sized}`)
    writeFileSync(join(pub, file), await page.screenshot({ omitBackground: true, type: 'png' }))
    await page.close()
    console.log(`public/${file} ${size}×${size}`)
  }
} finally {
  await browser.close()
}
