/**
 * Reads the Prometheus text exposition format (version 0.0.4) the way a
 * scraper does, strictly: a line that the format's grammar does not allow
 * fails the read, naming the line. No well-kept parser package checks the
 * values (the one on npm keeps them as text and accepts `Nan`), so the
 * grammar is written out here:
 *
 *   # HELP <name> <text, \\ and \n escaped>
 *   # TYPE <name> counter|gauge|histogram|summary|untyped
 *   # <any other comment>
 *   <name>[{<label>="<value, \\ \" \n escaped>",...}] <value> [<timestamp>]
 *
 * A value is a float as Go's ParseFloat writes it, or exactly `NaN`, `+Inf`
 * or `-Inf`; a timestamp is an integer of milliseconds. A family's TYPE comes
 * before its samples, once; its samples follow one another and carry its name
 * (with `_bucket`, `_sum`, `_count` for a histogram, `_sum`, `_count` for a
 * summary).
 */
export interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

const METRIC_NAME = '[a-zA-Z_:][a-zA-Z0-9_:]*';
const LABEL_NAME = '[a-zA-Z_][a-zA-Z0-9_]*';
const LABEL_VALUE = '"(?:[^"\\\\\\n]|\\\\[\\\\"n])*"';
const LABEL = `${LABEL_NAME}=${LABEL_VALUE}`;
const FLOAT = '[+-]?(?:[0-9]+(?:\\.[0-9]*)?|\\.[0-9]+)(?:[eE][+-]?[0-9]+)?|NaN|[+-]Inf';
const SAMPLE_LINE = new RegExp(`^(${METRIC_NAME})(?:\\{((?:${LABEL}(?:,${LABEL})*,?)?)\\})? (${FLOAT})(?: (-?[0-9]+))?$`);
const HELP_LINE = new RegExp(`^# HELP (${METRIC_NAME}) (?:[^\\\\\\n]|\\\\[\\\\n])*$`);
const TYPE_LINE = new RegExp(`^# TYPE (${METRIC_NAME}) (counter|gauge|histogram|summary|untyped)$`);
type MetricType = 'counter' | 'gauge' | 'histogram' | 'summary' | 'untyped';

/** The value a sample line writes: the float grammar above, read as a number. */
export function parseSampleValue(text: string): number {
  if (!new RegExp(`^(?:${FLOAT})$`).test(text)) throw new Error(`not a Prometheus sample value: ${text}`);
  if (text === 'NaN') return NaN;
  if (text.endsWith('Inf')) return text.startsWith('-') ? -Infinity : Infinity;
  return Number(text);
}

function unescapeLabelValue(quoted: string): string {
  return quoted.slice(1, -1).replace(/\\(["\\n])/g, (_, escaped: string) => (escaped === 'n' ? '\n' : escaped));
}

/** The names a family of `type` may give its samples. */
function sampleNames(family: string, type: MetricType): string[] {
  if (type === 'histogram') return [`${family}_bucket`, `${family}_sum`, `${family}_count`];
  if (type === 'summary') return [family, `${family}_sum`, `${family}_count`];
  return [family];
}

export function parsePrometheusText(text: string): Sample[] {
  if (text !== '' && !text.endsWith('\n')) throw new Error('the exposition does not end with a line feed');
  const samples: Sample[] = [];
  const typed = new Map<string, MetricType>();
  const finished = new Set<string>();
  /** The family whose samples are being read, and its sample names. */
  let current: { family: string; names: string[] } | null = null;
  const lines = text.split('\n');
  lines.pop();
  lines.forEach((line, index) => {
    const fail = (why: string) => new Error(`line ${index + 1} ${why}: ${JSON.stringify(line)}`);
    if (line === '') return;
    if (line.startsWith('#')) {
      const help = HELP_LINE.exec(line);
      const type = TYPE_LINE.exec(line);
      if (/^# (HELP|TYPE) /.test(line) && !help && !type) throw fail('is not a valid HELP or TYPE line');
      if (type) {
        const family = type[1]!;
        if (typed.has(family)) throw fail('types a family a second time');
        if (finished.has(family) || current?.family === family) throw fail('types a family after its samples');
        typed.set(family, type[2] as MetricType);
      }
      return;
    }
    const match = SAMPLE_LINE.exec(line);
    if (!match) throw fail('is not a Prometheus sample line');
    const [, name, labelText = '', valueText] = match;
    if (!current || !current.names.includes(name!)) {
      if (current) finished.add(current.family);
      const family = [...typed.entries()].find(([candidate, type]) => sampleNames(candidate, type).includes(name!));
      const [familyName, type] = family ?? [name!, 'untyped' as MetricType];
      if (finished.has(familyName)) throw fail(`continues the family ${familyName} after other families`);
      current = { family: familyName, names: sampleNames(familyName, type) };
    }
    const labels: Record<string, string> = {};
    for (const label of labelText.matchAll(new RegExp(`(${LABEL_NAME})=(${LABEL_VALUE})`, 'g'))) {
      if (label[1]! in labels) throw fail(`repeats the label ${label[1]}`);
      labels[label[1]!] = unescapeLabelValue(label[2]!);
    }
    if (name!.endsWith('_bucket') && typed.get(current.family) === 'histogram') parseSampleValue(labels.le ?? 'missing');
    samples.push({ name: name!, labels, value: parseSampleValue(valueText!) });
  });
  return samples;
}

/** The value of the one sample with this name whose labels include `labels`; 0 when there is none. */
export function sampleValue(samples: readonly Sample[], name: string, labels: Record<string, string> = {}): number {
  const found = samples.filter((sample) => sample.name === name && Object.entries(labels).every(([key, value]) => sample.labels[key] === value));
  if (found.length > 1) throw new Error(`${found.length} samples of ${name} match ${JSON.stringify(labels)}`);
  return found[0]?.value ?? 0;
}
