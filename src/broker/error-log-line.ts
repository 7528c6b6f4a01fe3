/**
 * The line the broker's logger gets for an error that no `error` listener took: the error with
 * its name, and for a delivery that failed, which message at which attempt and what happens to
 * it next (`DeliveryFailureDetail`). The logger's detail carries the error itself, stack and all.
 */
export function errorLogLine(error: unknown, detail: Readonly<Record<string, unknown>>): string {
  const text = errorText(error);
  const { phase, subscription, messageId } = detail;
  if ((phase !== 'handler' && phase !== 'decode') || typeof subscription !== 'string' || typeof messageId !== 'string') return text;
  const isBatch = messageId.includes(',');
  const attempt = typeof detail['attempt'] === 'number' ? ` at attempt ${detail['attempt']}${ofMaxAttempts(detail)}` : '';
  const failed =
    phase === 'decode'
      ? `message ${messageId} did not decode${attempt}`
      : isBatch
        ? `the batch handler threw on messages ${messageId}`
        : `the handler threw on message ${messageId}${attempt}`;
  return [`subscription "${subscription}": ${failed}: ${text}`, ...whatNext(detail, isBatch)].join('; ');
}

/** `TypeError: boom`: the name leads even for a plain `Error`, so a log line always shows the kind. */
function errorText(error: unknown): string {
  if (error instanceof Error) return error.message === '' ? error.name : `${error.name}: ${error.message}`;
  if (typeof error === 'string') return error;
  try {
    return JSON.stringify(error) ?? String(error);
  } catch {
    return String(error);
  }
}

function ofMaxAttempts(detail: Readonly<Record<string, unknown>>): string {
  return typeof detail['maxAttempts'] === 'number' ? ` of ${detail['maxAttempts']}` : '';
}

function whatNext(detail: Readonly<Record<string, unknown>>, isBatch: boolean): string[] {
  const next: string[] = [];
  const { nextAttemptAt, retryDelayMs, deadLetter, deadLetteredIds } = detail;
  if (nextAttemptAt instanceof Date) {
    const first = isBatch ? ' (the first retried)' : '';
    next.push(
      typeof retryDelayMs === 'number' && retryDelayMs > 0
        ? `next attempt${first} at ${nextAttemptAt.toISOString()}, in ${formatDelay(retryDelayMs)}`
        : 'next attempt at once',
    );
  }
  if (deadLetter !== null && typeof deadLetter === 'object') {
    const destination =
      'group' in deadLetter ? `dead-letter group "${String(deadLetter.group)}"` : `dead-letter table "${String((deadLetter as { table?: unknown }).table)}"`;
    const which = isBatch && typeof deadLetteredIds === 'string' ? `${deadLetteredIds.includes(',') ? 'messages' : 'message'} ${deadLetteredIds} had ` : '';
    next.push(`${which}no attempt left: moved to ${destination}`);
  }
  if (detail['dropped'] === true) next.push('dropped (onDecodeFailure)');
  return next;
}

/** `250 ms`, `1.5 s`, `2.0 min`, `1.0 h`. */
export function formatDelay(ms: number): string {
  if (ms < 1_000) return `${Math.round(ms)} ms`;
  if (ms < 60_000) return `${(ms / 1_000).toFixed(1)} s`;
  if (ms < 3_600_000) return `${(ms / 60_000).toFixed(1)} min`;
  return `${(ms / 3_600_000).toFixed(1)} h`;
}
