/**
 * `<think>…</think>` handling for the OpenAI-compatible family (behaviour.md
 * §9): reasoning models served through plain chat completions (DeepSeek R1,
 * Qwen, …) put their reasoning inside the content. It moves to `thinking`.
 *
 * One splitter serves both a whole response and a stream, fed delta by delta,
 * so a streamed answer ends with exactly the content and thinking a
 * non-streamed one gives. A tag split across deltas (`<thi` + `nk>`) is held
 * back until it is complete.
 */

const OPEN_TAG = { text: '<think>', pattern: /<think>/i };
const CLOSE_TAG = { text: '</think>', pattern: /<\/think>/i };

export interface ThinkSegment {
  kind: 'content' | 'thinking';
  text: string;
}

export class ThinkTagSplitter {
  private insideThink = false;
  /** Text that may be the start of a tag; decided by the next push or by `end`. */
  private held = '';
  private sawTag = false;
  /** Set when a think block closed; the next block's text is separated from it. */
  private separateNextBlock = false;
  private readonly content: string[] = [];
  private readonly thinking: string[] = [];

  /** Feeds the next piece of content; returns what can be routed already. */
  push(text: string): ThinkSegment[] {
    const out: ThinkSegment[] = [];
    let rest = this.held + text;
    this.held = '';
    while (rest !== '') {
      const tag = this.insideThink ? CLOSE_TAG : OPEN_TAG;
      // A regex search, not toLowerCase + indexOf: lower-casing may change the length of non-ASCII text.
      const at = rest.search(tag.pattern);
      if (at === -1) {
        const keep = partialTagSuffixLength(rest, tag.text);
        this.emit(rest.slice(0, rest.length - keep), out);
        this.held = rest.slice(rest.length - keep);
        break;
      }
      this.emit(rest.slice(0, at), out);
      rest = rest.slice(at + tag.text.length);
      this.sawTag = true;
      if (this.insideThink) this.separateNextBlock = true;
      this.insideThink = !this.insideThink;
    }
    return out;
  }

  /** Flushes a held partial tag as ordinary text. */
  end(): ThinkSegment[] {
    const out: ThinkSegment[] = [];
    this.emit(this.held, out);
    this.held = '';
    return out;
  }

  /**
   * The final split. When a tag was seen, whitespace around the content is
   * trimmed (models put blank lines after `</think>`), and the text of
   * separate think blocks is joined with a blank line. An unclosed `<think>`
   * (the model ran out of tokens) keeps everything after it as thinking.
   */
  result(): { content: string; thinking: string | null } {
    const content = this.content.join('');
    if (!this.sawTag) return { content, thinking: null };
    const thinking = this.thinking.join('').trim();
    return { content: content.trim(), thinking: thinking === '' ? null : thinking };
  }

  private emit(text: string, out: ThinkSegment[]): void {
    if (text === '') return;
    if (this.insideThink) {
      if (this.separateNextBlock && this.thinking.length > 0) this.thinking.push('\n\n');
      this.separateNextBlock = false;
      this.thinking.push(text);
      out.push({ kind: 'thinking', text });
    } else {
      this.content.push(text);
      out.push({ kind: 'content', text });
    }
  }
}

/** Splits a whole response; the same rules as a stream. */
export function splitThinkTags(text: string): { content: string; thinking: string | null } {
  const splitter = new ThinkTagSplitter();
  splitter.push(text);
  splitter.end();
  return splitter.result();
}

/** How many trailing characters of `text` could be the beginning of `tag`. */
function partialTagSuffixLength(text: string, tag: string): number {
  const max = Math.min(tag.length - 1, text.length);
  for (let length = max; length > 0; length--) {
    if (text.slice(text.length - length).toLowerCase() === tag.slice(0, length)) return length;
  }
  return 0;
}
