// The active organization's webhook endpoints: create one (its signing
// secret is shown once), send a test event, read its deliveries, delete it.
import type { components } from 'gatehouse/client';
import { api, must } from '../clients.js';
import { can, inOrganization, rerender } from '../session.js';
import { button, form, h, list, type Screen, section, table, when } from '../ui.js';

type EventName = components['schemas']['CreateWebhook']['events'][number];

let secret = '';
/** The endpoint whose deliveries are listed. */
let inspected: string | null = null;

export const webhooks: Screen = async (root) => {
  if (!inOrganization(root)) return;
  const endpoints = can('organizations:read') ? await must(api.GET('/api/webhooks')) : [];
  const shown = h(
    'p',
    { id: 'webhook-secret-once', hidden: !secret },
    'Signing secret, shown only once: ',
    h('code', { id: 'webhook-secret' }, secret),
  );
  secret = '';
  const writable = can('organizations:write');
  root.append(
    section(
      'Webhook endpoints',
      shown,
      table(
        'webhooks',
        ['URL', 'Events', 'State', ''],
        endpoints.map((endpoint) => [
          endpoint.url,
          endpoint.events.join(', '),
          endpoint.enabled ? 'enabled' : `disabled${endpoint.disabledReason ? `: ${endpoint.disabledReason}` : ''}`,
          h(
            'span',
            { dataset: { url: endpoint.url } },
            writable &&
              button('send test event', () => sendTest(endpoint.id), { textContent: 'Send test', className: 'test' }),
            button(
              'show deliveries',
              async () => {
                inspected = endpoint.id;
                await rerender();
              },
              { textContent: 'Deliveries', className: 'deliveries' },
            ),
            writable &&
              button(
                'delete webhook',
                async () => {
                  await must(api.DELETE('/api/webhooks/{id}', { params: { path: { id: endpoint.id } } }));
                  if (inspected === endpoint.id) inspected = null;
                  await rerender();
                },
                { textContent: 'Delete', className: 'delete' },
              ),
          ),
        ]),
      ),
    ),
  );
  if (inspected && endpoints.some((endpoint) => endpoint.id === inspected)) root.append(await deliveries(inspected));
  if (!writable) return;
  root.append(
    section(
      'New endpoint',
      form(
        'webhook-form',
        'create webhook',
        [
          { name: 'url', label: 'URL', type: 'url', placeholder: 'https://example.com/webhooks/gatehouse' },
          { name: 'events', label: 'Events', value: '*', placeholder: 'member.added, role.updated or *' },
        ],
        async (values) => {
          const created = await must(
            api.POST('/api/webhooks', { body: { url: values.url, events: list(values.events) as EventName[] } }),
          );
          secret = created.secret;
          await rerender();
        },
      ),
    ),
  );
};

async function sendTest(id: string): Promise<void> {
  await must(api.POST('/api/webhooks/{id}/test', { params: { path: { id } } }));
  inspected = id;
  await rerender();
}

async function deliveries(id: string): Promise<HTMLElement> {
  const page = await must(api.GET('/api/webhooks/{id}/deliveries', { params: { path: { id } } }));
  return section(
    'Deliveries',
    table(
      'deliveries',
      ['Event', 'Status', 'Attempts', 'Last answer', 'Next attempt'],
      page.items.map((delivery) => [
        delivery.eventType,
        delivery.status,
        delivery.attempts,
        delivery.lastStatusCode ?? delivery.lastError ?? '—',
        delivery.status === 'pending' ? when(delivery.nextAttemptAt) : '—',
      ]),
    ),
  );
}
