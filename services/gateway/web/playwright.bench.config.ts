// Benchmarks of the web client (the figures of issue 12), not tests: the
// specs in bench/ measure and write JSON files that BenchmarkWebClient
// (services/e2e/web) reads and reports, against the real stack
// it starts: `go test -run '^$' -bench WebClient -benchtime 1x ./services/e2e/web/`.
// The normal config (playwright.config.ts) never runs them. The browser is
// Debian's chromium; nothing here downloads one.
import { defineConfig } from '@playwright/test'
import { chromiumLaunch } from './e2e/chromium'

const baseURL = process.env.ALICIA_WEB_BASE_URL
if (!baseURL) throw new Error('ALICIA_WEB_BASE_URL is not set: run the benchmarks through go test -bench WebClient ./services/e2e/web/')

export default defineConfig({
  testDir: 'bench',
  testMatch: '**/*.bench.ts',
  // One measurement at a time: nothing else loads the machine.
  workers: 1,
  fullyParallel: false,
  retries: 0,
  timeout: 15 * 60_000,
  expect: { timeout: 20_000 },
  reporter: 'list',
  outputDir: 'bench-results/playwright',
  use: {
    baseURL,
    viewport: { width: 1280, height: 800 },
    screenshot: 'off',
    trace: 'off',
    actionTimeout: 20_000,
    launchOptions: chromiumLaunch,
  },
  projects: [{ name: 'chromium', use: { browserName: 'chromium' } }],
})
