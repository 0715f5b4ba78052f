/**
 * Pre-serialised results: a result's JSON built once and carried, as it is,
 * into every graphql-ws message that sends it.
 *
 * A result stands in a graphql-ws message as a marker (its `toJSON`) that is
 * unique to its table of markers (a random nonce) and to this result; the
 * transport replaces the quoted marker with the result's JSON (`expand`).
 * graphql-ws serialises a message and hands it to the transport in one
 * synchronous step, so a marker is registered only until that hand-over.
 * One table per server (see serveSubscriptions): its results and its
 * transport share it.
 */
import crypto from 'node:crypto';
import type { ExecutionResult } from 'graphql';
import { stringifyResponse } from '../raw-json';

/** Markers serialised and not yet expanded; a safety bound, a table holds one at a time. */
const PENDING_LIMIT = 1024;

export class PreSerialized implements ExecutionResult {
  private encoded: Buffer | null = null;
  constructor(
    readonly result: ExecutionResult,
    readonly json: string,
    private readonly markers: PreSerializedMarkers,
  ) {}

  /** The JSON's UTF-8 bytes, encoded once for every frame that carries them. */
  get bytes(): Buffer {
    return (this.encoded ??= Buffer.from(this.json));
  }

  /** Kept for code that reads the result (graphql-ws's onNext hook). */
  get data() {
    return this.result.data;
  }

  get errors() {
    return this.result.errors;
  }

  toJSON(): string {
    return this.markers.register(this.json);
  }
}

/** The markers of one server's pre-serialised results, from their serialisation to their expansion by the transport. */
export class PreSerializedMarkers {
  private readonly nonce = crypto.randomBytes(12).toString('hex');
  /** How a marker starts inside a serialised message (with its opening quote). */
  private readonly markerPrefix = `"pw-serialized-${this.nonce}-`;
  private readonly pending = new Map<string, string>();
  private counter = 0;

  /** The result, serialised once (RawJson values keep their exact text). */
  preSerialized(result: ExecutionResult): PreSerialized {
    return new PreSerialized(result, stringifyResponse(result), this);
  }

  /** A marker for this JSON, registered until the next `expand`. */
  register(json: string): string {
    if (this.pending.size >= PENDING_LIMIT) this.pending.clear();
    const marker = `pw-serialized-${this.nonce}-${(this.counter += 1)}`;
    this.pending.set(marker, json);
    return marker;
  }

  /** An outgoing message with every marker replaced by its result's JSON. */
  expand(message: string): string {
    const prefix = this.markerPrefix;
    const pending = this.pending;
    let start = message.indexOf(prefix);
    if (start < 0) return message;
    let out = '';
    let from = 0;
    while (start >= 0) {
      const end = message.indexOf('"', start + prefix.length);
      const marker = message.slice(start + 1, end);
      const json = pending.get(marker);
      if (json === undefined) throw new Error('A pre-serialised subscription result was not registered before it was sent');
      out += message.slice(from, start) + json;
      from = end + 1;
      start = message.indexOf(prefix, from);
    }
    pending.clear();
    return out + message.slice(from);
  }
}

export function isPreSerialized(value: unknown): value is PreSerialized {
  return value instanceof PreSerialized;
}
