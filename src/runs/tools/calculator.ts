/**
 * The `calculator` built-in tool: arithmetic with `+ - * / % ( )`, decimals
 * and unary signs, evaluated by a small recursive-descent parser. Never `eval`
 * or `Function`: the expression comes from a model, and a model's text is
 * input, not code.
 *
 * Grammar (whitespace allowed between tokens):
 *
 *     expression := term (("+" | "-") term)*
 *     term       := unary (("*" | "/" | "%") unary)*
 *     unary      := ("-" | "+") unary | primary
 *     primary    := number | "(" expression ")"
 *     number     := digits ["." [digits]] | "." digits
 *
 * `%` is the remainder with the dividend's sign, as in most languages.
 * Anything outside the grammar, a division or remainder by zero, and a
 * result (or intermediate value) that is not a finite number throw a
 * `CalculatorError`; the loop turns that into an error result.
 */

import type { ToolRegistration } from './tool-registry';

export class CalculatorError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'CalculatorError';
  }
}

/** Longest expression accepted, in characters. */
export const MAX_EXPRESSION_LENGTH = 2000;
/** Deepest nesting of parentheses and unary signs accepted. */
export const MAX_NESTING_DEPTH = 100;

const WHITESPACE = new Set([' ', '\t', '\n', '\r']);

class ArithmeticParser {
  private position = 0;
  private depth = 0;

  constructor(private readonly text: string) {}

  parse(): number {
    const value = this.expression();
    this.skipWhitespace();
    if (this.position < this.text.length) {
      throw new CalculatorError(`unexpected "${this.text.charAt(this.position)}" at position ${this.position + 1}`);
    }
    return value;
  }

  private expression(): number {
    let value = this.term();
    for (;;) {
      const operator = this.peek();
      if (operator !== '+' && operator !== '-') {
        return value;
      }
      this.position += 1;
      const right = this.term();
      value = finite(operator === '+' ? value + right : value - right);
    }
  }

  private term(): number {
    let value = this.unary();
    for (;;) {
      const operator = this.peek();
      if (operator !== '*' && operator !== '/' && operator !== '%') {
        return value;
      }
      this.position += 1;
      const right = this.unary();
      if (operator === '*') {
        value = finite(value * right);
      } else if (right === 0) {
        throw new CalculatorError(operator === '/' ? 'division by zero' : 'remainder by zero');
      } else {
        value = finite(operator === '/' ? value / right : value % right);
      }
    }
  }

  private unary(): number {
    const sign = this.peek();
    if (sign === '-' || sign === '+') {
      this.position += 1;
      const operand = this.nested(() => this.unary());
      return sign === '-' ? -operand : operand;
    }
    return this.primary();
  }

  private primary(): number {
    const next = this.peek();
    if (next === '(') {
      this.position += 1;
      const value = this.nested(() => this.expression());
      if (this.peek() !== ')') {
        throw new CalculatorError(
          this.position >= this.text.length ? 'missing ")"' : `expected ")" at position ${this.position + 1}`,
        );
      }
      this.position += 1;
      return value;
    }
    if (next !== undefined && (isDigit(next) || next === '.')) {
      return this.number();
    }
    if (next === undefined) {
      throw new CalculatorError('unexpected end of expression');
    }
    throw new CalculatorError(`unexpected "${next}" at position ${this.position + 1}`);
  }

  private number(): number {
    const start = this.position;
    let digits = 0;
    while (isDigit(this.text.charAt(this.position))) {
      this.position += 1;
      digits += 1;
    }
    if (this.text.charAt(this.position) === '.') {
      this.position += 1;
      while (isDigit(this.text.charAt(this.position))) {
        this.position += 1;
        digits += 1;
      }
    }
    if (digits === 0) {
      throw new CalculatorError(`a number needs digits at position ${start + 1}`);
    }
    return finite(Number(this.text.slice(start, this.position)));
  }

  private nested(parse: () => number): number {
    this.depth += 1;
    if (this.depth > MAX_NESTING_DEPTH) {
      throw new CalculatorError(`nesting deeper than ${MAX_NESTING_DEPTH} levels`);
    }
    const value = parse();
    this.depth -= 1;
    return value;
  }

  /** The next non-whitespace character, without consuming it. */
  private peek(): string | undefined {
    this.skipWhitespace();
    return this.position < this.text.length ? this.text.charAt(this.position) : undefined;
  }

  private skipWhitespace(): void {
    while (WHITESPACE.has(this.text.charAt(this.position))) {
      this.position += 1;
    }
  }
}

function isDigit(character: string): boolean {
  return character >= '0' && character <= '9';
}

function finite(value: number): number {
  if (!Number.isFinite(value)) {
    throw new CalculatorError('the result is not a finite number');
  }
  return value;
}

/** Evaluates an arithmetic expression; throws `CalculatorError` on anything else. */
export function evaluateArithmetic(expression: string): number {
  if (expression.length > MAX_EXPRESSION_LENGTH) {
    throw new CalculatorError(`the expression is longer than ${MAX_EXPRESSION_LENGTH} characters`);
  }
  if (expression.trim() === '') {
    throw new CalculatorError('the expression is empty');
  }
  return new ArithmeticParser(expression).parse();
}

/**
 * The number as the model reads it: 15 significant digits, which hides binary
 * floating-point noise (`0.1 + 0.2` answers `0.3`); `-0` answers `0`.
 */
export function formatNumber(value: number): string {
  const rounded = Number(value.toPrecision(15));
  return Object.is(rounded, -0) ? '0' : String(rounded);
}

export function createCalculatorTool(): ToolRegistration {
  return {
    name: 'calculator',
    description:
      'Evaluates an arithmetic expression with + - * / % and parentheses, decimal numbers and unary minus, and answers the number.',
    parameters: {
      type: 'object',
      properties: {
        expression: { type: 'string', description: 'The expression, e.g. "(12.5 + 7) * 3 % 4".' },
      },
      required: ['expression'],
      additionalProperties: false,
    },
    enabledByDefault: true,
    idempotent: true,
    execute(args) {
      // Inside the promise, so a CalculatorError rejects rather than throws.
      return new Promise<string>((resolve) => resolve(formatNumber(evaluateArithmetic(args.expression as string))));
    },
  };
}
