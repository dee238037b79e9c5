import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ERRORS } from '../../src/shared/errors.js';

/**
 * docs/api.md "Errors" shows the error table a reader of the repository looks
 * for; `ERRORS` (src/shared/errors.ts) is the table the service answers from
 * and the OpenAPI document is generated from. The page's copy is checked row
 * by row, so a code added, dropped, moved to another status or reworded in
 * one place fails here until the other says the same.
 */

const PAGE = readFileSync(join(import.meta.dirname, '../../docs/api.md'), 'utf8');

/** The rows of the first table under `## Errors`: status, code, when. */
function documentedErrors(): { status: number; code: string; description: string }[] {
  const section = PAGE.split(/^## /m).find((part) => part.startsWith('Errors\n')) ?? '';
  return section
    .split('\n')
    .map((line) => /^\| (\d{3}) \| `([A-Z_]+)` \| (.+) \|$/.exec(line))
    .filter((match) => match !== null)
    .map(([, status, code, description]) => ({
      status: Number(status),
      code: code ?? '',
      description: (description ?? '').replace(/\\\|/g, '|'),
    }));
}

describe('docs/api.md "Errors"', () => {
  it('lists every code of ERRORS, in its order, with its status and meaning', () => {
    const expected = Object.entries(ERRORS).map(([code, { status, description }]) => ({ status, code, description }));
    expect(documentedErrors()).toEqual(expected);
  });
});
