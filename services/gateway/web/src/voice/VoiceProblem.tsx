// A voice problem as the page shows it, by the voice button and in the
// settings' voice check: <p role="alert" data-voice-problem="<kind>">, the
// sentence (addresses in it as links, `code` as code) and, smaller, what
// the browser said.
import type { ReactNode } from 'react'
import type { VoiceProblem } from './preflight'

// Only the page's own sentences get links; an error's text (kind 'other')
// stays text.
// (No lookbehind: Safari before 16.4 would not parse the module.)
const TOKENS = /(`[^`]+`|https:\/\/[^\s)]+|\/ca\b)/

function rich(message: string, links: boolean): ReactNode[] {
  return message.split(TOKENS).map((part, i) => {
    if (i % 2 === 0) return part
    if (part.startsWith('`')) return <code key={i} className="font-mono">{part.slice(1, -1)}</code>
    return links ? <a key={i} href={part} className="underline">{part}</a> : part
  })
}

export function VoiceProblemText({ problem, className = '' }: { problem: VoiceProblem; className?: string }) {
  return (
    <p role="alert" data-voice-problem={problem.kind} className={`text-red-800 dark:text-red-200 ${className}`}>
      {rich(problem.message, problem.kind !== 'other')}
      {problem.detail && problem.kind !== 'other' && <span className="block text-xs text-red-700 dark:text-red-300">{problem.detail}</span>}
    </p>
  )
}
