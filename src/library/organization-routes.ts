import { z } from 'zod';
import { access } from '../auth/access.js';
import { answerHasPermission, answerMemberRole } from './answers.js';
import { httpUrl, line, metadata, organizationRef, orgName, pageNumber, slug, uuid } from './fields.js';
import { answerStoredRoles, revokeOrganizationKeys } from './organization-calls.js';
import type { LibraryRoute } from './row.js';

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

/**
 * The organization plugin's routes for organizations themselves (docs/api.md
 * "Organizations"): permission strings, checked in the organization acted on.
 */
export const ORGANIZATION_ROUTES: readonly LibraryRoute[] = [
  {
    method: 'POST',
    path: '/organization/create',
    summary: 'Create an organization (the caller becomes its Owner)',
    access: session(),
    tier: 'global',
    transaction: 'rollback-refusals',
    after: answerStoredRoles,
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
  {
    method: 'POST',
    path: '/organization/check-slug',
    summary: 'Whether a slug is free',
    access: session(),
    tier: 'global',
    transaction: 'none',
    body: z.object({ slug }).strict(),
  },
  {
    method: 'GET',
    path: '/organization/list',
    summary: "The caller's organizations",
    access: session(),
    tier: 'global',
    transaction: 'none',
  },
  {
    method: 'POST',
    path: '/organization/set-active',
    summary: "Set (or clear) the session's active organization",
    access: session(),
    tier: 'global',
    transaction: 'rollback-refusals',
    body: z
      .object({ organizationId: z.union([uuid, z.null()]).optional(), organizationSlug: slug.optional() })
      .strict(),
  },
  {
    method: 'POST',
    path: '/organization/update',
    summary: "Change an organization's name, slug, logo or metadata",
    access: inOrganization('organizations:write'),
    tier: 'global',
    organization: 'body',
    transaction: 'none',
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
    summary: 'Delete an organization (revokes its API keys)',
    // docs/security.md "Sensitive actions and step-up".
    access: session({ organization: true, permissions: ['organizations:delete'], sensitive: true }),
    tier: 'global',
    organization: 'body',
    transaction: 'rollback-refusals',
    before: revokeOrganizationKeys,
    body: z.object({ organizationId: uuid.optional() }).strict(),
  },
  {
    method: 'GET',
    path: '/organization/get-organization',
    summary: 'One organization',
    access: inOrganization('organizations:read'),
    tier: 'global',
    organization: 'query',
    transaction: 'none',
    query: z.object(organizationRef).strict(),
  },
  {
    method: 'GET',
    path: '/organization/get-full-organization',
    summary: 'One organization with its members and invitations',
    access: inOrganization('members:read'),
    tier: 'global',
    organization: 'query',
    transaction: 'rollback-refusals',
    query: z.object({ ...organizationRef, membersLimit: pageNumber(100).optional() }).strict(),
  },
  {
    method: 'GET',
    path: '/organization/list-members',
    summary: "An organization's members, paged",
    access: inOrganization('members:read'),
    tier: 'global',
    organization: 'query',
    transaction: 'none',
    query: listMembersQuery,
  },
  {
    method: 'GET',
    path: '/organization/get-active-member',
    summary: "The caller's membership of the active organization",
    access: session({ organization: true }),
    tier: 'global',
    transaction: 'none',
  },
  {
    method: 'GET',
    path: '/organization/get-active-member-role',
    summary: "The caller's role and permissions (or, with members:read, another member's)",
    access: session({ organization: true }),
    tier: 'global',
    organization: 'query',
    transaction: 'none',
    answer: answerMemberRole,
    query: z.object({ ...organizationRef, userId: uuid.optional() }).strict(),
  },
  {
    method: 'POST',
    path: '/organization/has-permission',
    summary: 'Whether the caller holds the permissions named, in the organization',
    access: session({ organization: true }),
    tier: 'global',
    organization: 'body',
    transaction: 'none',
    answer: answerHasPermission,
    body: z
      .object({
        organizationId: uuid.optional(),
        permissions: z.record(z.string().max(64), z.array(z.string().max(64)).max(16)).optional(),
        permission: z.record(z.string().max(64), z.array(z.string().max(64)).max(16)).optional(),
      })
      .strict(),
  },
];
