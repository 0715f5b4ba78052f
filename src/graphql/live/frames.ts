/**
 * WebSocket frames as the fan-out writes them: whole, unmasked, uncompressed
 * text frames (RFC 6455 §5.2), built in one buffer each, so that a frame costs
 * one buffer and one write (see delivery-turns).
 */

/** The header of an unmasked, unfragmented text frame (RFC 6455 §5.2) of `length` bytes, written into `frame`; returns its size. */
function writeFrameHeader(frame: Buffer, length: number): number {
  frame[0] = 0x81;
  if (length < 126) {
    frame[1] = length;
    return 2;
  }
  if (length < 65_536) {
    frame[1] = 126;
    frame.writeUInt16BE(length, 2);
    return 4;
  }
  frame[1] = 127;
  frame.writeUInt32BE(Math.floor(length / 2 ** 32), 2);
  frame.writeUInt32BE(length >>> 0, 6);
  return 10;
}

const headerSize = (length: number) => (length < 126 ? 2 : length < 65_536 ? 4 : 10);

/** A text message as a server's WebSocket frame. */
export function textFrame(text: string): Buffer {
  const length = Buffer.byteLength(text);
  const frame = Buffer.allocUnsafe(headerSize(length) + length);
  frame.write(text, writeFrameHeader(frame, length), 'utf8');
  return frame;
}

const CLOSING_BRACE = 0x7d;

/**
 * A subscription's `next` message as a frame: its `prefix` (`{"id":…,"payload":`), the payload's
 * UTF-8 bytes (encoded once per event and group, see PreSerialized.bytes) and the closing brace.
 */
export function nextFrame(prefix: Buffer, payload: Buffer): Buffer {
  const length = prefix.length + payload.length + 1;
  const frame = Buffer.allocUnsafe(headerSize(length) + length);
  let offset = writeFrameHeader(frame, length);
  offset += prefix.copy(frame, offset);
  offset += payload.copy(frame, offset);
  frame[offset] = CLOSING_BRACE;
  return frame;
}

const PREFIXES_LIMIT = 4096;

/**
 * The part of a subscription's `next` message before its payload, as graphql-ws writes it, by
 * subscription id (clients number their subscriptions, so most ids recur): one buffer per id for every
 * subscription that has it. Each is a buffer of its own: a slice of Node's shared pool would keep that
 * pool's 8 kB alive for as long as the subscription lasts. One table per server (see serveSubscriptions).
 */
export class NextPrefixes {
  private readonly prefixes = new Map<string, Buffer>();

  /** The prefix of subscription `id`'s `next` messages. */
  of(id: string): Buffer {
    let prefix = this.prefixes.get(id);
    if (!prefix) {
      const text = `{"id":${JSON.stringify(id)},"type":"next","payload":`;
      prefix = Buffer.allocUnsafeSlow(Buffer.byteLength(text));
      prefix.write(text);
      if (this.prefixes.size >= PREFIXES_LIMIT) this.prefixes.clear();
      this.prefixes.set(id, prefix);
    }
    return prefix;
  }
}
