// The LAN test: Chromium on another host (the "laptop" network namespace
// of TestLANVoice, services/cli/internal/lane2e) opens the HTTPS address
// `alicia up` printed on the "box", trusting only the CA that up made (an
// NSS database in the browser's HOME, never ignoreHTTPSErrors), signs in,
// talks with a fake microphone and installs the app; the same page over
// plain HTTP says why voice cannot start. Run it through
// `go test -run TestLANVoice -v ./services/cli/internal/lane2e/`.
import { defineConfig } from '@playwright/test'
import { withFakeMicrophone } from './e2e/chromium'

const baseURL = process.env.ALICIA_WEB_BASE_URL
const mic = process.env.ALICIA_WEB_FAKE_MIC
if (!baseURL || !mic) throw new Error('ALICIA_WEB_BASE_URL or ALICIA_WEB_FAKE_MIC is not set: run through go test -run TestLANVoice ./services/cli/internal/lane2e/')

export default defineConfig({
  testDir: 'e2e-lan',
  workers: 1,
  fullyParallel: false,
  forbidOnly: !!process.env.CI,
  retries: 0,
  timeout: 120_000,
  expect: { timeout: 20_000 },
  reporter: 'list',
  outputDir: 'test-results-lan',
  use: {
    baseURL,
    viewport: { width: 1280, height: 800 },
    screenshot: 'only-on-failure',
    trace: 'off',
    actionTimeout: 10_000,
    permissions: ['microphone'],
    launchOptions: withFakeMicrophone(mic),
  },
  projects: [{ name: 'chromium', use: { browserName: 'chromium' } }],
})
