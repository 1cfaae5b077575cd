import { createHash } from 'node:crypto'
import { readdirSync, readFileSync } from 'node:fs'
import { join, resolve } from 'node:path'
import { defineConfig } from 'vitest/config'
import type { Plugin } from 'vite'
import react from '@vitejs/plugin-react'
import tailwindcss from '@tailwindcss/vite'

// Files larger than this are not precached (a future model or wasm file of
// megabytes): the service worker still caches a hashed one when it is used.
const PRECACHE_MAX_BYTES = 2 << 20

// serviceWorker builds src/sw.ts to dist/sw.js and writes into it what to
// precache: index.html, every file of the build (hashed assets and public/:
// icons, manifest) but sw.js itself, sorted, and a hash of their names and
// contents as the cache's version, so that any change to the build is a new
// sw.js (the browser installs it and drops the old cache) and the same
// sources give the same bytes.
function serviceWorker(): Plugin {
  let root = ''
  let publicDir = ''
  let base = '/'
  return {
    name: 'alicia:service-worker',
    apply: 'build',
    configResolved(c) {
      root = c.root
      publicDir = c.publicDir
      base = c.base
    },
    buildStart() {
      this.emitFile({ type: 'chunk', id: resolve(root, 'src/sw.ts'), fileName: 'sw.js' })
    },
    generateBundle: {
      order: 'post',
      handler(_, bundle) {
        const sw = bundle['sw.js']
        if (sw?.type !== 'chunk') return this.error('sw.js is not in the bundle')
        if (sw.imports.length || sw.dynamicImports.length) return this.error(`sw.js imports ${sw.imports.join(', ')}: it must be one script`)
        const files = new Map<string, Uint8Array | string>()
        for (const [name, out] of Object.entries(bundle)) if (name !== 'sw.js') files.set(name, out.type === 'chunk' ? out.code : out.source)
        const walk = (dir: string, prefix: string): void => {
          for (const e of readdirSync(dir, { withFileTypes: true })) {
            if (e.isDirectory()) walk(join(dir, e.name), `${prefix}${e.name}/`)
            else if (!files.has(prefix + e.name)) files.set(prefix + e.name, readFileSync(join(dir, e.name)))
          }
        }
        if (publicDir) walk(publicDir, '')
        if (!files.has('index.html')) return this.error('index.html is not in the bundle')
        const urls: string[] = []
        const version = createHash('sha256')
        for (const name of [...files.keys()].sort()) {
          const data = files.get(name)!
          if (Buffer.byteLength(data) > PRECACHE_MAX_BYTES) continue
          urls.push(base + name)
          version.update(`${base + name}\n${createHash('sha256').update(data).digest('hex')}\n`)
        }
        const marker = 'globalThis.__ALICIA_PRECACHE__'
        const parts = sw.code.split(marker)
        if (parts.length !== 2) return this.error(`sw.js has ${parts.length - 1} ${marker}, not one`)
        sw.code = parts.join(JSON.stringify({ version: version.digest('hex').slice(0, 16), urls }))
      },
    },
  }
}

// The build is committed (dist/, embedded by the gateway) and checked to be
// reproducible: no timestamps, stable chunk names from content hashes.
export default defineConfig({
  plugins: [react(), tailwindcss(), serviceWorker()],
  build: {
    outDir: 'dist',
    emptyOutDir: true,
    sourcemap: false,
    target: 'es2022',
    assetsInlineLimit: 0,
    modulePreload: { polyfill: false },
  },
  server: {
    proxy: {
      '/v1': { target: process.env.ALICIA_GATEWAY ?? 'http://127.0.0.1:8080', ws: true },
    },
  },
  test: {
    include: ['src/**/*.test.ts', 'src/**/*.test.tsx'],
    environment: 'node',
  },
})
