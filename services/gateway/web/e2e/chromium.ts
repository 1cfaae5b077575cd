// How the browser tests and benchmarks start Debian's chromium (never a
// downloaded browser): as root without the sandbox, and without the
// background connections this machine's closed network refuses.
export const chromiumLaunch = {
  executablePath: '/usr/bin/chromium',
  args: [
    '--no-sandbox',
    '--no-first-run',
    '--disable-background-networking',
    '--disable-component-update',
    '--disable-sync',
    '--disable-gpu',
    '--disable-quic',
  ],
}
