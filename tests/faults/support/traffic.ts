/**
 * Mixed traffic of several tenants against the service: reads and writes of
 * roles, keys and members, sessions and sign-ins, each answer recorded with
 * when it was sent. Writes the service acknowledged are remembered, so a test
 * can check they were committed with their audit entries.
 */
import { CookieJar } from '../../support/http.js';
import { type Answer, PASSWORD, type Service, type User } from './harness.js';

export interface Tenant extends User {
  organizationId: string;
}

export interface Sent extends Answer {
  at: number;
  tenant: string;
}

export interface Traffic {
  answers: Sent[];
  createdRoles: { tenant: string; id: string }[];
  createdKeys: { tenant: string; id: string }[];
  revokedKeys: { tenant: string; id: string }[];
  stop(): Promise<void>;
}

const OK = new Set([200, 201, 202]);
export const isOk = (status: number) => OK.has(status);

export function startTraffic(
  service: Service,
  tenants: Tenant[],
  { workers = 4, pauseMs = 20 }: { workers?: number; pauseMs?: number } = {},
): Traffic {
  const traffic: Traffic = { answers: [], createdRoles: [], createdKeys: [], revokedKeys: [], stop: async () => {} };
  const keysOf = new Map<string, string[]>();
  let running = true;
  let counter = 0;

  const step = async (tenant: Tenant, holder: { pick?: number } = {}): Promise<Answer> => {
    const pick = Math.floor(Math.random() * 8);
    holder.pick = pick;
    counter += 1;
    switch (pick) {
      case 0:
        return service.request('/api/roles', { jar: tenant.jar });
      case 1:
        return service.request('/api/members', { jar: tenant.jar });
      case 2:
        return service.request('/api/session', { jar: tenant.jar });
      case 3: {
        const answer = await service.request('/api/roles', {
          body: { name: `Fault role ${counter} ${crypto.randomUUID().slice(0, 6)}`, permissions: ['roles:read'] },
          jar: tenant.jar,
        });
        if (answer.status === 201) traffic.createdRoles.push({ tenant: tenant.organizationId, id: answer.body.id });
        return answer;
      }
      case 4: {
        const create = () =>
          service.request('/api/api-keys', {
            body: { name: `fault key ${counter}`, scopes: ['roles:read'] },
            jar: tenant.jar,
          });
        let answer = await create();
        // A sensitive action: the tenant's password sign-in counts for STEP_UP_MAX_AGE (600 s), less than a
        // long fault run (docs/security.md "Sensitive actions and step-up"); it proves the password again.
        if (answer.status === 403 && answer.body?.code === 'STEP_UP_REQUIRED') {
          const stepUp = await service.request('/api/session/step-up', {
            body: { password: PASSWORD },
            jar: tenant.jar,
          });
          if (stepUp.status !== 200) return stepUp;
          answer = await create();
        }
        if (answer.status === 201) {
          traffic.createdKeys.push({ tenant: tenant.organizationId, id: answer.body.id });
          keysOf.set(tenant.organizationId, [...(keysOf.get(tenant.organizationId) ?? []), answer.body.id]);
        }
        return answer;
      }
      case 5: {
        const id = keysOf.get(tenant.organizationId)?.shift();
        if (!id) return service.request('/api/api-keys', { jar: tenant.jar });
        const answer = await service.request(`/api/api-keys/${id}`, { method: 'DELETE', jar: tenant.jar });
        if (answer.status === 200) traffic.revokedKeys.push({ tenant: tenant.organizationId, id });
        return answer;
      }
      case 6:
        return service.request('/api/auth/sign-in/email', {
          body: { email: tenant.email, password: PASSWORD },
          jar: new CookieJar(),
        });
      default:
        return service.request('/api/health');
    }
  };

  const worker = async (index: number) => {
    while (running) {
      const tenant = tenants[(index + Math.floor(Math.random() * tenants.length)) % tenants.length]!;
      const at = performance.now();
      const holder: { pick?: number } = {};
      try {
        const answer = await step(tenant, holder);
        traffic.answers.push({ ...answer, at, tenant: tenant.organizationId });
      } catch (error) {
        traffic.answers.push({
          status: 0,
          body: null,
          text: String(error),
          ms: performance.now() - at,
          // Which request it was (the step's pick), for the report.
          path: `transport (step ${holder.pick})`,
          method: '',
          at,
          tenant: tenant.organizationId,
        });
      }
      await new Promise((resolve) => setTimeout(resolve, pauseMs));
    }
  };
  const done = Promise.all(Array.from({ length: workers }, (_, i) => worker(i)));
  traffic.stop = async () => {
    running = false;
    await done;
  };
  return traffic;
}

export const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Polls `GET /api/health` until it answers 200; the time it took, ms. */
export async function waitHealthy(service: Service, withinMs = 30_000): Promise<number> {
  const started = performance.now();
  while (performance.now() - started < withinMs) {
    const answer = await service.request('/api/health', { timeoutMs: 5000 }).catch(() => null);
    if (answer?.status === 200) return performance.now() - started;
    await sleep(100);
  }
  throw new Error(`not healthy within ${withinMs} ms`);
}
