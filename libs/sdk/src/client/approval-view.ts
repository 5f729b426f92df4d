import type { ListApprovalsRequest } from '@toolgate/contracts';

/** An approval as the gateway lists it. */
export type { ApprovalView } from '@toolgate/contracts';

/** Filters of `client.approvals.list()` (the tenant always comes from the token). */
export type ApprovalFilter = ListApprovalsRequest;
