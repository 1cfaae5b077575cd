// The parts of an answer that show how it was made: reasoning steps, tool
// uses, the memories put in its context, and the prompt versions and judge's
// scores behind it.
import { useState } from 'react'
import type { Judgement, MemoryUsed, MessagePromptVersion, Reasoning, ToolUse } from '../types'
import { navigate } from '../router'
import { VoteBar } from '../improve/Feedback'

function json(v: unknown): string {
  if (v === undefined) return ''
  try {
    return JSON.stringify(v, null, 2)
  } catch {
    return String(v)
  }
}

export function ReasoningSteps({ messageId, steps }: { messageId: string; steps: Reasoning[] }) {
  return (
    <details className="rounded-lg border border-slate-200 text-sm dark:border-slate-800">
      <summary className="focus-ring cursor-pointer rounded-lg px-3 py-1.5 text-slate-700 dark:text-slate-300">
        Reasoning ({steps.length} {steps.length === 1 ? 'step' : 'steps'})
      </summary>
      <ol className="space-y-2 px-3 pb-2">
        {steps.map((r) => (
          <li key={r.sequence} className="space-y-1">
            <p className="whitespace-pre-wrap text-slate-700 dark:text-slate-300">{r.content}</p>
            {r.id && <VoteBar messageId={messageId} targetType="reasoning" targetId={r.id} votes={r.votes} label={`reasoning step ${r.sequence}`} />}
          </li>
        ))}
      </ol>
    </details>
  )
}

export function ToolUseCard({ messageId, t }: { messageId: string; t: ToolUse }) {
  const [open, setOpen] = useState(false)
  const pending = t.status === 'pending' || t.status === 'running'
  const failed = !pending && (t.status === 'error' || t.status === 'failed' || t.errorCode !== undefined)
  const duration = t.durationMs ?? (t.startedAt && t.finishedAt ? t.finishedAt - t.startedAt : undefined)
  return (
    <div className="rounded-lg border border-slate-200 text-sm dark:border-slate-800" data-testid="tool-use">
      <button type="button" aria-expanded={open} onClick={() => setOpen(!open)} className="focus-ring flex w-full items-center justify-between gap-2 rounded-lg px-3 py-1.5 text-left">
        <span>
          <span className="font-mono font-medium">{t.toolName}</span>{' '}
          <span className={pending ? 'text-amber-700 dark:text-amber-400' : failed ? 'text-red-700 dark:text-red-400' : 'text-emerald-700 dark:text-emerald-400'}>
            {pending ? 'running…' : failed ? `failed${t.errorCode ? ` (${t.errorCode})` : ''}` : 'done'}
          </span>
        </span>
        {duration !== undefined && <span className="text-xs text-slate-500">{duration} ms</span>}
      </button>
      {open && (
        <div className="space-y-2 px-3 pb-2">
          <div>
            <div className="text-xs font-medium text-slate-600 dark:text-slate-400">Arguments</div>
            <pre className="overflow-x-auto rounded bg-slate-100 p-2 text-xs dark:bg-slate-900">{json(t.arguments)}</pre>
          </div>
          {failed ? (
            <p className="text-red-700 dark:text-red-400">{t.errorMessage ?? 'The tool failed.'}</p>
          ) : (
            !pending && (
              <div>
                <div className="text-xs font-medium text-slate-600 dark:text-slate-400">Result</div>
                <pre className="max-h-64 overflow-auto rounded bg-slate-100 p-2 text-xs dark:bg-slate-900">{json(t.result)}</pre>
              </div>
            )
          )}
          <VoteBar messageId={messageId} targetType="tool_use" targetId={t.id} votes={t.votes} label={`tool use ${t.toolName}`} />
        </div>
      )}
    </div>
  )
}

export function MemoriesUsed({ messageId, uses }: { messageId: string; uses: MemoryUsed[] }) {
  return (
    <details className="rounded-lg border border-slate-200 text-sm dark:border-slate-800">
      <summary className="focus-ring cursor-pointer rounded-lg px-3 py-1.5 text-slate-700 dark:text-slate-300">
        Used {uses.length} {uses.length === 1 ? 'memory' : 'memories'}
      </summary>
      <ul className="space-y-2 px-3 pb-2">
        {uses.map((u) => (
          <li key={u.memoryId} className="space-y-1">
            <p>
              {u.content}{' '}
              <span className="text-xs text-slate-500" title="similarity to the question">
                ({Math.round(u.similarity * 100)}% similar)
              </span>
            </p>
            {u.queryPrompt && (
              <p className="text-xs text-slate-500" data-testid="memory-query">
                Found by searching “{u.queryPrompt}”{u.queryPromptMeta?.prefetched === true ? ' (searched ahead)' : ''}
              </p>
            )}
            <div className="flex flex-wrap items-center gap-2">
              <a href={`/memories/${encodeURIComponent(u.memoryId)}`} className="focus-ring text-xs text-indigo-700 underline dark:text-indigo-300"
                onClick={(e) => { e.preventDefault(); navigate({ name: 'memories', id: u.memoryId }) }}>
                Open memory
              </a>
              <VoteBar messageId={messageId} targetType={u.id ? 'memory_usage' : 'memory'} targetId={u.id ?? u.memoryId} votes={u.votes} label="this memory's use" />
            </div>
          </li>
        ))}
      </ul>
    </details>
  )
}

const pct = (v: number) => `${Math.round(v * 100)} %`

// AnswerDetails: the prompt versions that produced an answer (component
// and version number) and the judge's scores of it, with its rationale.
export function AnswerDetails({ versions, judgement }: { versions?: MessagePromptVersion[]; judgement?: Judgement }) {
  return (
    <div className="w-full max-w-3xl space-y-2 rounded-lg border border-slate-200 p-2 text-sm dark:border-slate-800" data-testid="answer-details">
      {versions && versions.length > 0 && (
        <div>
          <div className="text-xs font-medium text-slate-600 dark:text-slate-400">Made with</div>
          <ul className="flex flex-wrap gap-1" aria-label="Prompt versions">
            {versions.map((v) => (
              <li key={v.component + v.id} className="rounded bg-slate-100 px-1.5 py-0.5 text-xs dark:bg-slate-800" data-testid="prompt-version" title={v.id}>
                {v.component.replace('_', ' ')} {v.version !== undefined ? `v${v.version}` : '(no longer stored)'}
              </li>
            ))}
          </ul>
        </div>
      )}
      {judgement && (
        <div data-testid="judgement">
          <div className="text-xs font-medium text-slate-600 dark:text-slate-400">Judged{judgement.model ? ` by ${judgement.model}` : ''}</div>
          <p className="text-xs">
            correctness {pct(judgement.correctness)} · faithfulness {pct(judgement.faithfulness)} · relevancy {pct(judgement.relevancy)}
          </p>
          {judgement.rationale && <p className="text-xs text-slate-700 italic dark:text-slate-300">{judgement.rationale}</p>}
        </div>
      )}
      {!(versions && versions.length > 0) && !judgement && <p className="text-xs text-slate-500">Nothing recorded about how this answer was made.</p>}
    </div>
  )
}
