// Browser tests of the web client. They run against the real stack that
// services/e2e/web (TestBrowser) starts and describes in
// ALICIA_WEB_* variables: `go test -run TestBrowser -v ./services/e2e/web/`.
// The browser is Debian's chromium; nothing here downloads one.
import { defineConfig } from '@playwright/test'
import { chromiumLaunch } from './e2e/chromium'

const baseURL = process.env.ALICIA_WEB_BASE_URL
if (!baseURL) throw new Error('ALICIA_WEB_BASE_URL is not set: run the browser tests through go test -run TestBrowser ./services/e2e/web/')

export default defineConfig({
  testDir: 'e2e',
  // One stack for every spec, and specs share its users: one at a time.
  workers: 1,
  fullyParallel: false,
  forbidOnly: !!process.env.CI,
  retries: 0,
  timeout: 60_000,
  expect: { timeout: 10_000 },
  reporter: 'list',
  outputDir: 'test-results',
  use: {
    baseURL,
    viewport: { width: 1280, height: 800 },
    screenshot: 'only-on-failure',
    trace: 'off',
    actionTimeout: 10_000,
    launchOptions: chromiumLaunch,
  },
  projects: [{ name: 'chromium', use: { browserName: 'chromium' } }],
})
