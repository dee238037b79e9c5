import { z } from 'zod';
import { access } from '../auth/access.js';
import {
  address,
  httpUrl,
  type LibraryRoute,
  line,
  metadata,
  organizationRef,
  orgName,
  pageNumber,
  slug,
  uuid,
} from './fields.js';

const MEMBER_FIELDS = ['createdAt', 'role', 'userId', 'id'] as const;

const listMembersQuery = z
  .object({
    ...organizationRef,
    limit: pageNumber(100).optional(),
    offset: pageNumber(100_000).optional(),
    sortBy: z.enum(MEMBER_FIELDS).optional(),
    sortDirection: z.enum(['asc', 'desc']).optional(),
    filterField: z.enum(MEMBER_FIELDS).optional(),
    filterOperator: z.enum(['eq', 'ne']).optional(),
    filterValue: line(256).optional(),
  })
  .strict();

const session = access.session;
/** A permission list checked in the organization the call acts on (not necessarily the active one). */
const inOrganization = access.permissions;

/** The organization plugin's routes: permission strings, checked in the organization acted on. */
export const ORGANIZATION_ROUTES: readonly LibraryRoute[] = [
  // Organizations (API.md "Organizations"): permission strings, in the organization acted on.
  {
    method: 'POST',
    path: '/organization/create',
    access: session(),
    transactional: true,
    body: z
      .object({
        name: orgName,
        slug,
        logo: z.union([httpUrl, z.null()]).optional(),
        metadata: metadata.optional(),
        keepCurrentActiveOrganization: z.boolean().optional(),
      })
      .strict(),
  },
  { method: 'POST', path: '/organization/check-slug', access: session(), body: z.object({ slug }).strict() },
  { method: 'GET', path: '/organization/list', access: session() },
  {
    method: 'POST',
    path: '/organization/set-active',
    access: session(),
    transactional: true,
    body: z
      .object({ organizationId: z.union([uuid, z.null()]).optional(), organizationSlug: slug.optional() })
      .strict(),
  },
  {
    method: 'POST',
    path: '/organization/update',
    access: inOrganization('organizations:write'),
    organization: 'body',
    body: z
      .object({
        organizationId: uuid.optional(),
        data: z
          .object({
            name: orgName.optional(),
            slug: slug.optional(),
            logo: z.union([httpUrl, z.null()]).optional(),
            metadata: metadata.optional(),
          })
          .strict(),
      })
      .strict(),
  },
  {
    method: 'POST',
    path: '/organization/delete',
    // docs/security.md "Sensitive actions and step-up".
    access: session({ organization: true, permissions: ['organizations:delete'], sensitive: true }),
    organization: 'body',
    transactional: true,
    body: z.object({ organizationId: uuid.optional() }).strict(),
  },
  {
    method: 'GET',
    path: '/organization/get-organization',
    access: inOrganization('organizations:read'),
    organization: 'query',
    query: z.object(organizationRef).strict(),
  },
  {
    method: 'GET',
    path: '/organization/get-full-organization',
    access: inOrganization('members:read'),
    organization: 'query',
    transactional: true,
    query: z.object({ ...organizationRef, membersLimit: pageNumber(100).optional() }).strict(),
  },
  {
    method: 'GET',
    path: '/organization/list-members',
    access: inOrganization('members:read'),
    organization: 'query',
    query: listMembersQuery,
  },
  { method: 'GET', path: '/organization/get-active-member', access: session({ organization: true }) },
  {
    method: 'GET',
    path: '/organization/get-active-member-role',
    access: session({ organization: true }),
    organization: 'query',
    answeredByService: true,
    query: z.object({ ...organizationRef, userId: uuid.optional() }).strict(),
  },
  {
    method: 'POST',
    path: '/organization/has-permission',
    access: session({ organization: true }),
    organization: 'body',
    answeredByService: true,
    body: z
      .object({
        organizationId: uuid.optional(),
        permissions: z.record(z.string().max(64), z.array(z.string().max(64)).max(16)).optional(),
        permission: z.record(z.string().max(64), z.array(z.string().max(64)).max(16)).optional(),
      })
      .strict(),
  },
  {
    method: 'POST',
    path: '/organization/invite-member',
    access: inOrganization('invitations:write'),
    organization: 'body',
    transactional: true,
    body: z
      .object({
        email: address,
        role: slug.optional(),
        organizationId: uuid.optional(),
        resend: z.boolean().optional(),
      })
      .strict(),
  },
  {
    method: 'POST',
    path: '/organization/cancel-invitation',
    access: inOrganization('invitations:delete'),
    organization: 'invitation',
    body: z.object({ invitationId: uuid }).strict(),
  },
  {
    method: 'GET',
    path: '/organization/list-invitations',
    access: inOrganization('invitations:read'),
    organization: 'query',
    query: z.object(organizationRef).strict(),
  },
  {
    method: 'POST',
    path: '/organization/accept-invitation',
    access: session(),
    transactional: true,
    body: z.object({ invitationId: uuid }).strict(),
  },
  {
    method: 'POST',
    path: '/organization/reject-invitation',
    access: session(),
    body: z.object({ invitationId: uuid }).strict(),
  },
  { method: 'GET', path: '/organization/get-invitation', access: session(), query: z.object({ id: uuid }).strict() },
  { method: 'GET', path: '/organization/list-user-invitations', access: session(), query: z.object({}).strict() },
  {
    method: 'POST',
    path: '/organization/remove-member',
    access: inOrganization('members:delete'),
    organization: 'body',
    transactional: true,
    body: z.object({ memberIdOrEmail: z.union([uuid, address]), organizationId: uuid.optional() }).strict(),
  },
  {
    method: 'POST',
    path: '/organization/leave',
    access: session({ organization: true }),
    organization: 'body',
    transactional: true,
    body: z.object({ organizationId: uuid.optional() }).strict(),
  },
];
