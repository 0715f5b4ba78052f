/**
 * A turn's run as the Vercel AI SDK's UI message stream (protocol v1, the
 * `x-vercel-ai-ui-message-stream: v1` stream that `useChat` reads): a pure
 * translation of the run's stored steps and live deltas into the stream's
 * chunks. No I/O here; `chat-stream.ts` feeds it and writes the chunks.
 *
 * What must stay true: the text chunks of a stream join to exactly what the
 * stored steps say, whatever the order and completeness of the deltas. A
 * delta is used only when it continues the text sent so far (its `offset`
 * equals what was sent); a gap (a piece missed, a watcher that joined late)
 * waits for the stored LLM step, whose content supplies the rest; a repeat
 * is skipped. So a stream replayed from the trace mid-turn has no gap and
 * no duplicate.
 */

/** A tool call as a stored LLM or approval step holds it (the fields read here). */
interface StepToolCall {
  id: string;
  name: string;
  arguments: unknown;
}

/** A decision as a stored approval step holds it (the fields read here). */
interface StepDecision {
  toolCallId: string;
  approved: boolean;
}

/** The chunks of the UI message stream this service sends (the `ai` package's `UIMessageChunk`, the subset used). */
export type UIMessageChunk =
  | { type: 'start'; messageId: string }
  | { type: 'start-step' }
  | { type: 'finish-step' }
  | { type: 'text-start'; id: string }
  | { type: 'text-delta'; id: string; delta: string }
  | { type: 'text-end'; id: string }
  | { type: 'reasoning-start'; id: string }
  | { type: 'reasoning-delta'; id: string; delta: string }
  | { type: 'reasoning-end'; id: string }
  | { type: 'tool-input-available'; toolCallId: string; toolName: string; input: unknown; dynamic: true }
  | { type: 'tool-approval-request'; approvalId: string; toolCallId: string }
  | { type: 'tool-output-available'; toolCallId: string; output: unknown; dynamic: true }
  | { type: 'tool-output-error'; toolCallId: string; errorText: string; dynamic: true }
  | { type: 'tool-output-denied'; toolCallId: string }
  | { type: 'error'; errorText: string }
  | { type: 'abort'; reason?: string }
  | { type: 'finish'; finishReason: UIFinishReason };

export type UIFinishReason = 'stop' | 'length' | 'content-filter' | 'tool-calls' | 'error' | 'other';

/** The response headers of the stream (as the `ai` package's `UI_MESSAGE_STREAM_HEADERS`). */
export const UI_MESSAGE_STREAM_HEADERS: Readonly<Record<string, string>> = {
  'content-type': 'text/event-stream',
  'cache-control': 'no-cache',
  connection: 'keep-alive',
  'x-vercel-ai-ui-message-stream': 'v1',
  'x-accel-buffering': 'no',
};

/** One chunk as an SSE event. */
export function sseEvent(chunk: UIMessageChunk): string {
  return `data: ${JSON.stringify(chunk)}\n\n`;
}

/** The last event of every stream. */
export const SSE_DONE = 'data: [DONE]\n\n';

/** A live piece of output (the runs' `LoopDelta`). */
export interface TurnDelta {
  kind: 'content' | 'thinking';
  text: string;
  round: number;
  offset: number;
}

/** A stored step of the run, as far as the stream reads it. */
export interface TurnStep {
  kind: string;
  round: number;
  [field: string]: unknown;
}

/** What the translation says after a step: go on, the run waits for a person's decision, or the stream is over. */
export type StreamState = 'open' | 'awaiting-approval' | 'finished';

/** One streamed part (a text or a reasoning) of one round. */
interface Part {
  id: string;
  sent: string;
  started: boolean;
  ended: boolean;
}

/**
 * The translation of one turn. `start()` first, then every delta and every
 * stored step in the order they arrive (steps in sequence order, each once);
 * each call returns the chunks to send.
 */
export class TurnStreamTranslator {
  private stepRound: number | null = null;
  private readonly parts = new Map<string, Part>();
  private lastFinishReason: UIFinishReason = 'stop';
  state: StreamState = 'open';

  constructor(private readonly messageId: string) {}

  start(): UIMessageChunk[] {
    return [{ type: 'start', messageId: this.messageId }];
  }

  delta(delta: TurnDelta): UIMessageChunk[] {
    if (this.state === 'finished') return [];
    const out: UIMessageChunk[] = [];
    const part = this.part(delta.kind, delta.round, out);
    if (part.ended) return out;
    const end = delta.offset + delta.text.length;
    // A gap (offset past what was sent) waits for the stored step; a repeat adds only what is new.
    if (delta.offset > part.sent.length || end <= part.sent.length) return out;
    this.send(delta.kind, part, delta.text.slice(part.sent.length - delta.offset), out);
    return out;
  }

  step(step: TurnStep): UIMessageChunk[] {
    if (this.state === 'finished') return [];
    const out: UIMessageChunk[] = [];
    switch (step.kind) {
      case 'request':
        this.openStep(step.round, out);
        break;
      case 'llm': {
        this.openStep(step.round, out);
        const thinking = typeof step.thinking === 'string' ? step.thinking : '';
        if (thinking !== '') this.complete('thinking', step.round, thinking, out);
        const content = typeof step.content === 'string' ? step.content : '';
        if (content !== '' || this.parts.has(partKey('content', step.round))) this.complete('content', step.round, content, out);
        for (const call of (step.requestedToolCalls as StepToolCall[] | undefined) ?? []) {
          out.push({ type: 'tool-input-available', toolCallId: call.id, toolName: call.name, input: call.arguments, dynamic: true });
        }
        this.lastFinishReason = uiFinishReason(step.finishReason);
        break;
      }
      case 'approval': {
        const pending = (step.pendingToolCalls as StepToolCall[] | undefined) ?? [];
        for (const call of pending) out.push({ type: 'tool-approval-request', approvalId: call.id, toolCallId: call.id });
        if (pending.length > 0) this.state = 'awaiting-approval';
        for (const decision of (step.decisions as StepDecision[] | undefined) ?? []) {
          if (!decision.approved) out.push({ type: 'tool-output-denied', toolCallId: decision.toolCallId });
        }
        if ((step.decisions as unknown[] | undefined)?.length) this.state = 'open';
        break;
      }
      case 'tool': {
        const toolCallId = String(step.toolCallId);
        const result = typeof step.toolResult === 'string' ? step.toolResult : JSON.stringify(step.toolResult ?? null);
        out.push(step.toolIsError === true ? { type: 'tool-output-error', toolCallId, errorText: result, dynamic: true } : { type: 'tool-output-available', toolCallId, output: result, dynamic: true });
        break;
      }
      case 'end':
        this.closeStep(out);
        out.push(...this.ending(step));
        this.state = 'finished';
        break;
      default:
        // assembled, context: nothing a chat shows.
        break;
    }
    return out;
  }

  /** The chunks that close a stream that stops while the run waits for a person's decision (the turn goes on after it). */
  pause(): UIMessageChunk[] {
    if (this.state === 'finished') return [];
    const out: UIMessageChunk[] = [];
    this.closeStep(out);
    out.push({ type: 'finish', finishReason: 'tool-calls' });
    this.state = 'finished';
    return out;
  }

  private ending(end: TurnStep): UIMessageChunk[] {
    const status = String(end.status);
    if (status === 'COMPLETED') return [{ type: 'finish', finishReason: this.lastFinishReason }];
    if (status === 'CANCELLED') return [{ type: 'abort', reason: 'The turn was cancelled.' }, { type: 'finish', finishReason: 'other' }];
    const error = typeof end.error === 'string' && end.error !== '' ? end.error : 'The turn failed.';
    return [{ type: 'error', errorText: error }, { type: 'finish', finishReason: 'error' }];
  }

  /** Steps follow rounds: a new round ends the parts of the one before. */
  private openStep(round: number, out: UIMessageChunk[]): void {
    if (this.stepRound === round) return;
    this.closeStep(out);
    this.stepRound = round;
    out.push({ type: 'start-step' });
  }

  private closeStep(out: UIMessageChunk[]): void {
    if (this.stepRound === null) return;
    for (const kind of ['thinking', 'content'] as const) {
      const part = this.parts.get(partKey(kind, this.stepRound));
      if (part) this.end(kind, part, out);
    }
    this.stepRound = null;
    out.push({ type: 'finish-step' });
  }

  private part(kind: TurnDelta['kind'], round: number, out: UIMessageChunk[]): Part {
    this.openStep(round, out);
    const key = partKey(kind, round);
    let part = this.parts.get(key);
    if (!part) this.parts.set(key, (part = { id: `${kind === 'content' ? 'text' : 'reasoning'}-${round}`, sent: '', started: false, ended: false }));
    return part;
  }

  /** The stored text of a part: what was not sent yet goes out, and the part ends. */
  private complete(kind: TurnDelta['kind'], round: number, stored: string, out: UIMessageChunk[]): void {
    const part = this.part(kind, round, out);
    if (part.ended) return;
    // Deltas that disagreed with the stored text cannot be taken back; the stored text's rest follows what was sent.
    if (stored.startsWith(part.sent) && stored.length > part.sent.length) this.send(kind, part, stored.slice(part.sent.length), out);
    this.end(kind, part, out);
  }

  private send(kind: TurnDelta['kind'], part: Part, text: string, out: UIMessageChunk[]): void {
    if (!part.started) {
      part.started = true;
      out.push(kind === 'content' ? { type: 'text-start', id: part.id } : { type: 'reasoning-start', id: part.id });
    }
    part.sent += text;
    out.push(kind === 'content' ? { type: 'text-delta', id: part.id, delta: text } : { type: 'reasoning-delta', id: part.id, delta: text });
  }

  private end(kind: TurnDelta['kind'], part: Part, out: UIMessageChunk[]): void {
    if (part.ended) return;
    part.ended = true;
    if (!part.started) return;
    out.push(kind === 'content' ? { type: 'text-end', id: part.id } : { type: 'reasoning-end', id: part.id });
  }
}

function partKey(kind: TurnDelta['kind'], round: number): string {
  return `${kind}:${round}`;
}

/** The provider's normalised finish reason in the stream's words. */
function uiFinishReason(reason: unknown): UIFinishReason {
  switch (reason) {
    case 'stop':
      return 'stop';
    case 'length':
      return 'length';
    case 'tool_calls':
      return 'tool-calls';
    case 'content_filter':
      return 'content-filter';
    case 'error':
      return 'error';
    default:
      return 'other';
  }
}
