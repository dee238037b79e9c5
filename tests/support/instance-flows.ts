/**
 * A client's flows through instances of the real Node entry
 * (tests/support/instances.ts): sign-up with the mailed link, sign-in, an
 * organization, the invitation flow. The two-instance suite and the bench's
 * staleness measurement (tests/perf/bench-staleness.ts) share them.
 */
import { CookieJar } from './http.js';
import { type Answer, type Instance, mailedPath } from './instances.js';

export const PASSWORD = 'correct horse battery staple';

export interface User {
  email: string;
  id: string;
  /** This user's client address (X-Forwarded-For), so the global tier never counts two users together. */
  ip: string;
  jar: CookieJar;
}

/** The body of an answer with `status`; else an error carrying the answer. */
export function bodyOf(answer: Answer, status: number): any {
  if (answer.status !== status)
    throw new Error(`expected ${status}, got ${answer.status} ${answer.text.slice(0, 300)}`);
  return answer.body;
}

/** Unique client addresses for one run: each in a /64 of its own (the limiter keys IPv6 clients by their /64). */
export function addressesFor(run: string): () => string {
  let count = 0;
  return () => {
    count += 1;
    return `2001:db8:${run.slice(0, 4)}:${count.toString(16)}::${run.slice(4, 8)}`;
  };
}

export async function signIn(via: Instance, user: Pick<User, 'email' | 'ip'>): Promise<{ id: string; jar: CookieJar }> {
  const jar = new CookieJar();
  const body = bodyOf(
    await via.request('/api/auth/sign-in/email', { body: { email: user.email, password: PASSWORD }, jar, ip: user.ip }),
    200,
  );
  return { id: body.user.id, jar };
}

/** Sign-up through `via`, the verification link it mailed, sign-in. */
export async function newUser(via: Instance, label: string, run: string, ip: string): Promise<User> {
  const email = `${label}-${run}-${crypto.randomUUID().slice(0, 8)}@example.test`;
  bodyOf(await via.request('/api/auth/sign-up/email', { body: { email, password: PASSWORD, name: label }, ip }), 200);
  const verified = await via.request(await mailedPath(via, email, /verif/i), { ip });
  if (verified.status !== 200 && verified.status !== 302)
    throw new Error(`verification link: ${verified.status} ${verified.text.slice(0, 200)}`);
  const { id, jar } = await signIn(via, { email, ip });
  return { email, id, ip, jar };
}

/** A new organization created by `owner` through `via`, made its active one. */
export async function newOrganization(via: Instance, owner: User, run: string): Promise<string> {
  const slug = `org-${run}-${crypto.randomUUID().slice(0, 8)}`;
  const created = bodyOf(
    await via.request('/api/auth/organization/create', { body: { name: slug, slug }, jar: owner.jar, ip: owner.ip }),
    200,
  );
  bodyOf(
    await via.request('/api/auth/organization/set-active', {
      body: { organizationId: created.id },
      jar: owner.jar,
      ip: owner.ip,
    }),
    200,
  );
  return created.id as string;
}

/** The real invitation flow: `owner` invites through `ownerVia`, `member` accepts through `memberVia` and makes it active. The membership id. */
export async function join(
  organizationId: string,
  owner: User,
  ownerVia: Instance,
  member: User,
  memberVia: Instance,
  role: string,
): Promise<string> {
  bodyOf(
    await ownerVia.request('/api/auth/organization/invite-member', {
      body: { email: member.email, role, organizationId },
      jar: owner.jar,
      ip: owner.ip,
    }),
    200,
  );
  const invitationId = (await mailedPath(ownerVia, member.email, /^Join /)).split('/').at(-1)!.split('?')[0]!;
  const accepted = bodyOf(
    await memberVia.request('/api/auth/organization/accept-invitation', {
      body: { invitationId },
      jar: member.jar,
      ip: member.ip,
    }),
    200,
  );
  bodyOf(
    await memberVia.request('/api/auth/organization/set-active', {
      body: { organizationId },
      jar: member.jar,
      ip: member.ip,
    }),
    200,
  );
  return accepted.member.id as string;
}
