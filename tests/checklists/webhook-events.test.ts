import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { describe, expect, it } from 'vitest';
import { AUDIT_ACTIONS, WEBHOOK_EVENTS } from '../../src/db/audit.js';

/**
 * The "add a webhook event" checklist (README "Contributing"): an
 * organization's change becomes an event by being an audit action written
 * with recordAudit in the change's transaction (the same statement queues
 * its deliveries). So a new event is
 *
 * 1. a name in AUDIT_ACTIONS (src/db/audit.ts),
 * 2. and in WEBHOOK_EVENTS unless it is a platform or account action
 *    (`user.*`, `account.*`) or the webhooks' own (`webhook.*`),
 * 3. written somewhere in src/ (an action nothing writes is a promise the
 *    service does not keep),
 * 4. listed in docs/api.md "Audit actions".
 *
 * The OpenAPI document's list of events is built from WEBHOOK_EVENTS
 * (src/routes/webhooks.ts), and `npm run client:check` fails until the typed
 * client is regenerated from it.
 */
const ROOT = join(import.meta.dirname, '..', '..');
const SRC = join(ROOT, 'src');

/** Actions that concern no organization's subscribers: platform, account and the webhooks' own. */
const NOT_DELIVERED = /^(user|account|webhook)\./;

function sources(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    return entry.isDirectory() ? sources(path) : entry.name.endsWith('.ts') ? [path] : [];
  });
}

/** The backticked action names of docs/api.md's "Audit actions" section. */
function documentedActions(): string[] {
  const text = readFileSync(join(ROOT, 'docs', 'api.md'), 'utf8');
  const section = /^## Audit actions\n([\s\S]*?)^## /m.exec(text)?.[1] ?? '';
  const table = section.split('\n').filter((line) => line.startsWith('|'));
  return [...table.join('\n').matchAll(/`([a-z_]+\.[a-z_]+)`/g)].map((m) => m[1]!);
}

describe('webhook events (checklist: add a webhook event)', () => {
  it('every organization action is a webhook event, and every webhook event an audit action', () => {
    const organizationActions = AUDIT_ACTIONS.filter((action) => !NOT_DELIVERED.test(action));
    expect([...WEBHOOK_EVENTS].sort()).toEqual([...organizationActions].sort());
  });

  it('every audit action is written somewhere in src/', () => {
    const texts = sources(SRC)
      .filter((path) => relative(SRC, path) !== join('db', 'audit.ts'))
      .map((path) => readFileSync(path, 'utf8'))
      .join('\n');
    expect(AUDIT_ACTIONS.filter((action) => !texts.includes(`'${action}'`))).toEqual([]);
  });

  it('docs/api.md "Audit actions" lists exactly the audit actions', () => {
    const documented = documentedActions();
    expect(documented.length).toBeGreaterThan(10);
    expect([...new Set(documented)].sort()).toEqual([...AUDIT_ACTIONS].sort());
  });
});
