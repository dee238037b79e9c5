// The active organization's audit log, newest first, a page at a time
// (`{ items, nextCursor }`).
import type { components } from 'gatehouse/client';
import { api, must } from '../clients.js';
import { inOrganization, rerender } from '../session.js';
import { button, h, type Screen, section, table, when } from '../ui.js';

type Entry = components['schemas']['AuditEntry'];

const PAGE = 20;
let loaded: Entry[] = [];
let cursor: string | null = null;
let more = false;

export const auditLog: Screen = async (root) => {
  if (!inOrganization(root)) return;
  if (!more) {
    const page = await must(api.GET('/api/audit-logs', { params: { query: { limit: PAGE } } }));
    loaded = page.items;
    cursor = page.nextCursor;
  }
  more = false;
  root.append(
    section(
      'Audit log',
      table(
        'audit-log',
        ['When', 'Action', 'Actor', 'Details'],
        loaded.map((entry) => [
          when(entry.createdAt),
          h('code', {}, entry.action),
          entry.actorId ?? '—',
          JSON.stringify(entry.metadata),
        ]),
      ),
      cursor &&
        button(
          'older entries',
          async () => {
            const page = await must(
              api.GET('/api/audit-logs', { params: { query: { limit: PAGE, cursor: cursor ?? undefined } } }),
            );
            loaded = [...loaded, ...page.items];
            cursor = page.nextCursor;
            more = true;
            await rerender();
          },
          { id: 'audit-more', textContent: 'Older entries' },
        ),
    ),
  );
};
