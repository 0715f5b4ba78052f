/**
 * A local OTLP/HTTP trace receiver for tests: a real node:http server on
 * 127.0.0.1, port 0, accepting `POST /v1/traces` as `application/x-protobuf`
 * (decoded here with a small protobuf wire reader over the OTLP message
 * layout) or `application/json`, and keeping every span it received.
 */
import { createServer, type IncomingHttpHeaders, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

export type AttributeValue = string | number | boolean | AttributeValue[] | null;

export interface ReceivedSpan {
  traceId: string;
  spanId: string;
  /** '' for a root span. */
  parentSpanId: string;
  name: string;
  /** OTLP SpanKind: 1 internal, 2 server, 3 client. */
  kind: number;
  startNs: bigint;
  endNs: bigint;
  attributes: Record<string, AttributeValue>;
  /** OTLP StatusCode: 0 unset, 1 ok, 2 error. */
  status: { code: number; message: string };
  events: { name: string; attributes: Record<string, AttributeValue> }[];
  resource: Record<string, AttributeValue>;
}

export interface ReceivedRequest {
  contentType: string;
  headers: IncomingHttpHeaders;
}

export class OtlpReceiver {
  readonly spans: ReceivedSpan[] = [];
  readonly requests: ReceivedRequest[] = [];
  /** While true, requests are held unanswered (a collector that hangs). */
  hang = false;
  private readonly held: ServerResponse[] = [];

  private constructor(
    private readonly server: Server,
    /** The base URL, as OTEL_EXPORTER_OTLP_ENDPOINT takes it. */
    readonly url: string,
  ) {}

  static async start(): Promise<OtlpReceiver> {
    let receiver: OtlpReceiver | null = null;
    const server = createServer((request, response) => {
      const chunks: Buffer[] = [];
      request.on('data', (chunk: Buffer) => chunks.push(chunk));
      request.on('end', () => receiver?.receive(request.url ?? '', request.headers, Buffer.concat(chunks), response));
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    receiver = new OtlpReceiver(server, `http://127.0.0.1:${(server.address() as AddressInfo).port}`);
    return receiver;
  }

  private receive(url: string, headers: IncomingHttpHeaders, body: Buffer, response: ServerResponse): void {
    if (url !== '/v1/traces') {
      response.writeHead(404).end();
      return;
    }
    const contentType = String(headers['content-type'] ?? '');
    this.requests.push({ contentType, headers });
    if (this.hang) {
      this.held.push(response);
      return;
    }
    try {
      this.spans.push(...(contentType.startsWith('application/json') ? decodeJson(JSON.parse(body.toString('utf8')) as JsonRequest) : decodeProtobuf(body)));
    } catch (error) {
      response.writeHead(400, { 'content-type': 'text/plain' }).end(String(error));
      return;
    }
    if (contentType.startsWith('application/json')) response.writeHead(200, { 'content-type': 'application/json' }).end('{}');
    else response.writeHead(200, { 'content-type': 'application/x-protobuf' }).end();
  }

  /** Waits until `select` finds what it needs among the spans received so far. */
  async waitFor<T>(select: (spans: ReceivedSpan[]) => T | null | undefined | false, timeoutMs = 20_000): Promise<T> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const found = select(this.spans);
      if (found) return found;
      if (Date.now() > deadline) throw new Error(`the expected spans did not arrive; received: ${this.spans.map((span) => span.name).join(', ')}`);
      await new Promise((resolve) => setTimeout(resolve, 25));
    }
  }

  async close(): Promise<void> {
    for (const response of this.held.splice(0)) response.destroy();
    this.server.closeAllConnections();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }
}

// ---- OTLP/JSON ---------------------------------------------------------------

interface JsonAnyValue {
  stringValue?: string;
  boolValue?: boolean;
  intValue?: string | number;
  doubleValue?: number;
  arrayValue?: { values?: JsonAnyValue[] };
}
type JsonKeyValue = { key: string; value: JsonAnyValue };
interface JsonRequest {
  resourceSpans?: {
    resource?: { attributes?: JsonKeyValue[] };
    scopeSpans?: {
      spans?: {
        traceId: string;
        spanId: string;
        parentSpanId?: string;
        name: string;
        kind: number;
        startTimeUnixNano: string | number;
        endTimeUnixNano: string | number;
        attributes?: JsonKeyValue[];
        status?: { code?: number; message?: string };
        events?: { name: string; attributes?: JsonKeyValue[] }[];
      }[];
    }[];
  }[];
}

function jsonValue(value: JsonAnyValue): AttributeValue {
  if (value.stringValue !== undefined) return value.stringValue;
  if (value.boolValue !== undefined) return value.boolValue;
  if (value.intValue !== undefined) return Number(value.intValue);
  if (value.doubleValue !== undefined) return value.doubleValue;
  if (value.arrayValue !== undefined) return (value.arrayValue.values ?? []).map(jsonValue);
  return null;
}

function jsonAttributes(list: JsonKeyValue[] | undefined): Record<string, AttributeValue> {
  return Object.fromEntries((list ?? []).map((entry) => [entry.key, jsonValue(entry.value)]));
}

function decodeJson(request: JsonRequest): ReceivedSpan[] {
  return (request.resourceSpans ?? []).flatMap((resourceSpans) => {
    const resource = jsonAttributes(resourceSpans.resource?.attributes);
    return (resourceSpans.scopeSpans ?? []).flatMap((scopeSpans) =>
      (scopeSpans.spans ?? []).map((span) => ({
        traceId: span.traceId,
        spanId: span.spanId,
        parentSpanId: span.parentSpanId ?? '',
        name: span.name,
        kind: span.kind,
        startNs: BigInt(span.startTimeUnixNano),
        endNs: BigInt(span.endTimeUnixNano),
        attributes: jsonAttributes(span.attributes),
        status: { code: span.status?.code ?? 0, message: span.status?.message ?? '' },
        events: (span.events ?? []).map((event) => ({ name: event.name, attributes: jsonAttributes(event.attributes) })),
        resource,
      })),
    );
  });
}

// ---- OTLP/protobuf -------------------------------------------------------------

type WireValue = bigint | Buffer;
type Fields = Map<number, WireValue[]>;

/** Splits one protobuf message into its fields: varints as bigint, everything else as bytes. */
function readFields(buffer: Buffer): Fields {
  const fields: Fields = new Map();
  let offset = 0;
  const varint = (): bigint => {
    let result = 0n;
    let shift = 0n;
    for (;;) {
      const byte = buffer[offset++];
      if (byte === undefined) throw new Error('truncated varint');
      result |= BigInt(byte & 0x7f) << shift;
      if ((byte & 0x80) === 0) return result;
      shift += 7n;
    }
  };
  while (offset < buffer.length) {
    const tag = Number(varint());
    const field = tag >>> 3;
    const wireType = tag & 7;
    let value: WireValue;
    if (wireType === 0) value = varint();
    else if (wireType === 1) value = buffer.subarray(offset, (offset += 8));
    else if (wireType === 5) value = buffer.subarray(offset, (offset += 4));
    else if (wireType === 2) {
      const length = Number(varint());
      value = buffer.subarray(offset, (offset += length));
    } else throw new Error(`unsupported wire type ${wireType}`);
    const list = fields.get(field) ?? [];
    list.push(value);
    fields.set(field, list);
  }
  return fields;
}

const bytesOf = (fields: Fields, field: number): Buffer[] => (fields.get(field) ?? []) as Buffer[];
const firstBytes = (fields: Fields, field: number): Buffer | undefined => bytesOf(fields, field)[0];
const stringOf = (fields: Fields, field: number): string => firstBytes(fields, field)?.toString('utf8') ?? '';
const varintOf = (fields: Fields, field: number): bigint => (fields.get(field)?.[0] as bigint | undefined) ?? 0n;

function anyValue(buffer: Buffer): AttributeValue {
  const fields = readFields(buffer);
  if (fields.has(1)) return stringOf(fields, 1);
  if (fields.has(2)) return varintOf(fields, 2) !== 0n;
  if (fields.has(3)) return Number(BigInt.asIntN(64, varintOf(fields, 3)));
  if (fields.has(4)) return firstBytes(fields, 4)!.readDoubleLE(0);
  if (fields.has(5)) return bytesOf(readFields(firstBytes(fields, 5)!), 1).map(anyValue);
  return null;
}

function attributesOf(list: Buffer[]): Record<string, AttributeValue> {
  return Object.fromEntries(
    list.map((entry) => {
      const keyValue = readFields(entry);
      const value = firstBytes(keyValue, 2);
      return [stringOf(keyValue, 1), value ? anyValue(value) : null];
    }),
  );
}

function decodeProtobuf(body: Buffer): ReceivedSpan[] {
  const spans: ReceivedSpan[] = [];
  for (const resourceSpansBytes of bytesOf(readFields(body), 1)) {
    const resourceSpans = readFields(resourceSpansBytes);
    const resourceBytes = firstBytes(resourceSpans, 1);
    const resource = resourceBytes ? attributesOf(bytesOf(readFields(resourceBytes), 1)) : {};
    for (const scopeSpansBytes of bytesOf(resourceSpans, 2)) {
      for (const spanBytes of bytesOf(readFields(scopeSpansBytes), 2)) {
        const span = readFields(spanBytes);
        const statusBytes = firstBytes(span, 15);
        const status = statusBytes ? readFields(statusBytes) : new Map();
        spans.push({
          traceId: firstBytes(span, 1)?.toString('hex') ?? '',
          spanId: firstBytes(span, 2)?.toString('hex') ?? '',
          parentSpanId: firstBytes(span, 4)?.toString('hex') ?? '',
          name: stringOf(span, 5),
          kind: Number(varintOf(span, 6)),
          startNs: firstBytes(span, 7)!.readBigUInt64LE(0),
          endNs: firstBytes(span, 8)!.readBigUInt64LE(0),
          attributes: attributesOf(bytesOf(span, 9)),
          status: { code: Number(varintOf(status, 3)), message: stringOf(status, 2) },
          events: bytesOf(span, 11).map((eventBytes) => {
            const event = readFields(eventBytes);
            return { name: stringOf(event, 2), attributes: attributesOf(bytesOf(event, 3)) };
          }),
          resource,
        });
      }
    }
  }
  return spans;
}
