// How the browser tests and benchmarks start Debian's chromium (never a
// downloaded browser): as root without the sandbox, and without the
// background connections this machine's closed network refuses.
export const chromiumLaunch = {
  // ALICIA_WEB_CHROMIUM: another start command for the same browser (a
  // wrapper that pins it to a CPU, say), for experiments.
  executablePath: process.env.ALICIA_WEB_CHROMIUM || '/usr/bin/chromium',
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

// withFakeMicrophone is chromiumLaunch with a fake microphone that plays
// wav once (48 kHz mono 16-bit) from when a page opens it; the permission
// prompt is answered yes and autoplay needs no gesture.
export function withFakeMicrophone(wav: string) {
  return {
    ...chromiumLaunch,
    args: [...chromiumLaunch.args, '--use-fake-ui-for-media-stream', '--use-fake-device-for-media-stream',
      `--use-file-for-fake-audio-capture=${wav}%noloop`, '--autoplay-policy=no-user-gesture-required'],
  }
}
