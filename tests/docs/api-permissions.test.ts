import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { PERMISSION_COUNT, RESOURCE_ACTIONS } from '../../src/shared/permissions.js';

/**
 * docs/api.md "Permissions and roles" names every resource with its actions
 * and the count: a permission added to `RESOURCE_ACTIONS` fails here until
 * the page says so too (README "Adding a permission").
 */
const PAGE = readFileSync(join(import.meta.dirname, '../../docs/api.md'), 'utf8');
const SECTION = PAGE.split(/^## /m).find((part) => part.startsWith('Permissions and roles\n')) ?? '';
/** The section's first paragraph, on one line. */
const FIRST = (SECTION.split('\n\n')[1] ?? '').replace(/\s+/g, ' ');

describe('docs/api.md "Permissions and roles"', () => {
  it('states the number of permissions', () => {
    expect(FIRST).toContain(`(${PERMISSION_COUNT} in all`);
  });

  it('names every resource and every action', () => {
    for (const [resource, actions] of Object.entries(RESOURCE_ACTIONS)) {
      expect(FIRST, resource).toContain(`\`${resource}\``);
      for (const action of actions) expect(FIRST, `${resource}:${action}`).toContain(`\`${action}\``);
    }
  });

  it('reads the paragraph it checks', () => {
    expect(FIRST).toMatch(/^A permission is `<resource>:<action>`/);
  });
});
