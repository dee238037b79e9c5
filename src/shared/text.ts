import { z } from 'zod';

/**
 * The control characters no text field carries, as a character-class body:
 * C0 (line breaks and NUL, which PostgreSQL text refuses, included), DEL, C1
 * (terminal escapes) and the Unicode line and paragraph separators. One set
 * for both doors (the service's routes and the auth library's) and for mail.
 */
export const CONTROL_CHARACTERS = '\\u0000-\\u001F\\u007F-\\u009F\\u2028\\u2029';

const CONTROL = new RegExp(`[${CONTROL_CHARACTERS}]`);
const CONTROL_RUNS = new RegExp(`[${CONTROL_CHARACTERS}]+`, 'g');

export function hasControlCharacters(value: string): boolean {
  return CONTROL.test(value);
}

/** The value on one line: each run of control characters (line breaks included) becomes one space. */
export function oneLine(value: string): string {
  return value.replace(CONTROL_RUNS, ' ');
}

// What String.prototype.trim removes (ECMAScript WhiteSpace and LineTerminator) that is not a control character.
const BLANK = ' \\u00A0\\u1680\\u2000-\\u200A\\u202F\\u205F\\u3000\\uFEFF';

/**
 * Blanks, one character that is neither blank nor control, then anything but
 * control characters: "not blank, no control characters". The first two
 * parts share no character, so matching stays linear.
 */
export const TEXT_PATTERN = new RegExp(`^[${BLANK}]*[^\\s${CONTROL_CHARACTERS}][^${CONTROL_CHARACTERS}]*$`);

/** Anything but control characters (the empty string included). */
export const LINE_PATTERN = new RegExp(`^[^${CONTROL_CHARACTERS}]*$`);

/**
 * One line of human text: 1..max characters as sent, not blank, no control
 * characters or line breaks; kept as sent. The checks read the string as
 * sent, so a document's `maxLength` and `pattern` say exactly what is accepted.
 */
export function text(max: number) {
  return z
    .string()
    .min(1, { abort: true })
    .max(max, { abort: true })
    .regex(TEXT_PATTERN, { message: 'must not be blank or contain control characters or line breaks' });
}

/** At most max characters without control characters; may be empty or blank. */
export function line(max: number) {
  return z.string().max(max).regex(LINE_PATTERN, { message: 'must not contain control characters' });
}

/**
 * A display name the service stores (a role's, an API key's): `text(max)`,
 * stored without surrounding blanks.
 */
export function displayName(max: number) {
  return text(max).trim();
}

/** The longest name anywhere: an organization's, a person's, a role's, an API key's. */
export const NAME_MAX = 100;

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/**
 * A UUID in either letter case. An id that is none names nothing the service
 * stores, and must not reach a uuid column (there a database error, not a 404).
 */
export function isUuid(value: string): boolean {
  return UUID.test(value);
}
